"""The set registry: the one list of sets every replica decodes with, in the report database
(SQLite on one box, PostgreSQL for a fleet) beside the reports and tokens (docs/sets.md).

A set is a row of ``sets`` keyed by its BLAKE3 digest (its manifest's), and its archive (a plain
tar of the set's folder, as the installing replica verified it) in ``set_chunks``, 4 MiB a row.
A bundled set is registered by reference: its row (``bundled``, no chunks) names it, and each
replica installs it from the copy its package ships (every replica ships the bundled sets), so
the database does not hold a second copy of bytes every data directory's cache already has.
Removing a set writes its tombstone (``removed_ms``): the row stays, so a removed bundled set is
not installed again at the next start; installing it again clears the tombstone. Each
capability's chosen default is a row of ``set_defaults``. Every replica reads the registry into
its local cache (:mod:`service.store.setsync`); a fetched archive is installed into the cache,
every file checked against the manifest, and its digest compared with the row's before use."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from wai_dispatch.codec.sets import MANIFEST_NAME, SetNotInstalled, SetStore
from wai_dispatch.codec.sets.errors import SetAmbiguous, SetDigestInvalid, SetTooLarge
from wai_dispatch.codec.sets.manifest import DIGEST_RE
from wai_dispatch.service.store.models import SetChunkRow, SetDefaultRow, SetRow
from wai_dispatch.service.store.report_store import ReportStore, as_store_down

#: The size of one ``set_chunks`` row.
CHUNK_BYTES = 4 * 1024 * 1024
#: The largest set the registry takes (its files' bytes): an archive is built, stored and
#: fetched whole in memory, and PostgreSQL's ``bytea`` ends at 1 GiB a value (a chunk is far
#: below it). Bigger sets belong in an object store (docs/sets.md).
MAX_SET_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """A set as the registry lists it (without its bytes)."""

    digest: str
    name: str
    capability: str
    version: str
    archive_bytes: int
    bundled: bool
    installed_ms: int
    removed_ms: int | None

    @property
    def live(self) -> bool:
        return self.removed_ms is None

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "name": self.name,
            "capability": self.capability,
            "version": self.version,
            "archive_bytes": self.archive_bytes,
            "bundled": self.bundled,
            "installed_ms": self.installed_ms,
            "removed_ms": self.removed_ms,
        }


def archive_of(store: SetStore, digest: str) -> bytes:
    """The set's folder as a plain tar (its manifest and each file it lists, in name order,
    with no owner and no time): the same set gives the same bytes on every replica."""
    entry = store.get(digest)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in [MANIFEST_NAME, *sorted(entry.manifest.files)]:
            data = (entry.path / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _chunks(data: bytes) -> Iterator[bytes]:
    for start in range(0, max(len(data), 1), CHUNK_BYTES):
        yield data[start : start + CHUNK_BYTES]


def _now() -> int:
    return int(time.time() * 1000)


class SetRegistry:
    """The ``sets`` tables of one report store. Every method raises :class:`StoreDown` when the
    database does not answer."""

    def __init__(self, store: ReportStore) -> None:
        self.store = store

    def entries(self) -> list[RegistryEntry]:
        """Every set the registry has known, removed ones with their tombstone, by digest."""
        table = SetRow.__table__
        cols = [table.c[f] for f in RegistryEntry.__dataclass_fields__]
        with as_store_down(), self.store.engine.connect() as conn:
            rows = conn.execute(select(*cols).order_by(table.c.digest)).all()
        return [RegistryEntry(*row) for row in rows]

    def live(self) -> dict[str, RegistryEntry]:
        return {e.digest: e for e in self.entries() if e.live}

    def resolve(self, prefix: str) -> str:
        """The live set whose digest starts with ``prefix`` (at least 4 hex digits)."""
        if not DIGEST_RE.fullmatch(prefix) and not (
            4 <= len(prefix) < 64 and all(c in "0123456789abcdef" for c in prefix)
        ):
            raise SetDigestInvalid(f"{prefix[:80]!r} is not a set digest or a prefix of one")
        found = [d for d in self.live() if d.startswith(prefix)]
        if not found:
            raise SetNotInstalled(f"no installed set's digest starts with {prefix}")
        if len(found) > 1:
            raise SetAmbiguous(f"{len(found)} installed sets' digests start with {prefix}")
        return found[0]

    def publish(self, local: SetStore, digest: str, *, bundled: bool = False) -> bool:
        """Put the set installed in ``local`` into the registry (its archive with it, unless
        ``bundled``: then by reference, no chunks); a removed one is installed again (its
        tombstone cleared). ``False`` when it was live
        already (another replica, or a start racing this one, put it there). A set over
        :data:`MAX_SET_BYTES` is ``set_too_large``."""
        entry = local.get(digest)
        if entry.manifest.total_size > MAX_SET_BYTES:
            raise SetTooLarge(
                f"set {digest[:16]}… is {entry.manifest.total_size:,} bytes; the set registry "
                f"takes sets of at most {MAX_SET_BYTES:,}"
            )
        table = SetRow.__table__
        with as_store_down():
            try:
                with self.store.engine.begin() as conn:
                    row = conn.execute(
                        select(table.c.removed_ms).where(table.c.digest == digest)
                    ).first()
                    if row is not None:
                        if row[0] is None:
                            return False
                        conn.execute(
                            update(SetRow)
                            .where(table.c.digest == digest)
                            .values(removed_ms=None, installed_ms=_now())
                        )
                        return True
                data = archive_of(local, digest)
                parts = [] if bundled else list(_chunks(data))
                with self.store.engine.begin() as conn:
                    conn.execute(
                        insert(SetRow).values(
                            digest=digest,
                            name=entry.name,
                            capability=entry.capability,
                            version=entry.version,
                            archive_bytes=len(data),
                            chunks=len(parts),
                            bundled=bundled,
                            installed_ms=_now(),
                            removed_ms=None,
                        )
                    )
                    if parts:
                        conn.execute(
                            insert(SetChunkRow),
                            [{"digest": digest, "seq": i, "data": p} for i, p in enumerate(parts)],
                        )
            except IntegrityError:
                return False  # a concurrent publish of the same set won
        return True

    def remove(self, digest: str) -> RegistryEntry:
        """Write the live set's tombstone (its bytes kept: installing it again is a flag),
        and drop it as any capability's default. :class:`SetNotInstalled` when not live."""
        table = SetRow.__table__
        with as_store_down(), self.store.engine.begin() as conn:
            done = conn.execute(
                update(SetRow)
                .where(table.c.digest == digest, table.c.removed_ms.is_(None))
                .values(removed_ms=_now())
            )
            conn.execute(delete(SetDefaultRow).where(SetDefaultRow.digest == digest))
        if not done.rowcount:
            raise SetNotInstalled(f"set {digest} is not installed")
        return next(e for e in self.entries() if e.digest == digest)

    def archive(self, digest: str) -> bytes:
        """The set's archive, its chunks joined in order (:class:`SetNotInstalled` when the
        registry has no bytes for it: a bundled set registered by reference has none)."""
        table = SetChunkRow.__table__
        with as_store_down(), self.store.engine.connect() as conn:
            parts = conn.execute(
                select(table.c.data).where(table.c.digest == digest).order_by(table.c.seq)
            ).all()
            want = conn.execute(
                select(SetRow.chunks, SetRow.archive_bytes).where(SetRow.digest == digest)
            ).first()
        data = b"".join(bytes(p[0]) for p in parts)
        if want is None or len(parts) != want[0] or len(data) != want[1]:
            raise SetNotInstalled(f"the set registry holds no whole archive of {digest}")
        return data

    def defaults(self) -> dict[str, str]:
        """Each capability's chosen default set."""
        with as_store_down(), self.store.engine.connect() as conn:
            rows = conn.execute(select(SetDefaultRow.capability, SetDefaultRow.digest)).all()
        return {c: d for c, d in rows}

    def set_default(self, capability: str, digest: str, *, replace: bool = True) -> bool:
        """Make ``digest`` the capability's default (``replace=False``: only when it has none);
        whether the registry's default is now ``digest``."""
        with as_store_down():
            try:
                with self.store.engine.begin() as conn:
                    current = conn.execute(
                        select(SetDefaultRow.digest).where(SetDefaultRow.capability == capability)
                    ).first()
                    if current is None:
                        conn.execute(
                            insert(SetDefaultRow).values(capability=capability, digest=digest)
                        )
                    elif replace:
                        conn.execute(
                            update(SetDefaultRow)
                            .where(SetDefaultRow.capability == capability)
                            .values(digest=digest)
                        )
                    else:
                        return bool(current[0] == digest)
            except IntegrityError:
                return False  # a concurrent start chose first
        return True
