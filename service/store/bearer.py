"""Bearer tokens: roles, creation (the secret is shown once, only its SHA-256 is stored),
listing, revocation, and the in-memory view the service checks requests against (refreshed
from the store, kept as last seen while the store is down).

Roles are ordered: ``admin`` may do what ``operator`` may, which may do what ``sink`` may.
"""

from __future__ import annotations

import enum
import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from wai_dispatch.dispatch.errors import InvalidInput, NotFound, Unavailable
from wai_dispatch.service.store import bearer_snapshot
from wai_dispatch.service.store.errors import StoreError
from wai_dispatch.service.store.models import TokenRow
from wai_dispatch.service.store.report_store import ReportStore, as_store_down

ADMIN_TOKEN_FILE = "admin-token"


class Role(enum.IntEnum):
    sink = 1
    operator = 2
    admin = 3


class TokenError(InvalidInput):
    """a token name or role that is not valid"""

    code = "token_invalid"


class TokenNotFound(NotFound, TokenError):
    """no live token with that name or id"""

    code = "token_not_found"


@dataclass(frozen=True)
class Principal:
    """Who a request is: the token's name (a sink's name is its sink id) and role."""

    name: str
    role: Role


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_role(text: str) -> Role:
    try:
        return Role[text]
    except KeyError:
        raise TokenError(f"role {text!r} is not one of sink, operator, admin") from None


def create(store: ReportStore, name: str, role: Role) -> str:
    """A new token for ``name`` with ``role``; returns the secret (stored only hashed)."""
    if not name or len(name) > 128 or not name.isprintable():
        raise TokenError("a token's name is 1–128 printable characters")
    secret = "wai_" + secrets.token_urlsafe(32)
    row = {"name": name, "role": role.name, "hash": digest(secret), "created_ms": _now()}
    with as_store_down(), store.engine.begin() as conn:
        conn.execute(insert(TokenRow).values(**row))
    return secret


def listing(store: ReportStore) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(TokenRow.__table__).order_by(TokenRow.id)).mappings().all()
    return [
        {
            "id": r["id"],
            "name": r["name"],
            "role": r["role"],
            "created_ms": r["created_ms"],
            "revoked": r["revoked_ms"] is not None,
        }
        for r in rows
    ]


def revoke(store: ReportStore, name_or_id: str) -> int:
    """Revoke every live token with that name (or that id); how many were revoked."""
    table = TokenRow.__table__
    where = table.c.name == name_or_id
    if name_or_id.isdigit():
        where = where | (table.c.id == int(name_or_id))
    with store.engine.begin() as conn:
        result = conn.execute(
            update(TokenRow).where(where, table.c.revoked_ms.is_(None)).values(revoked_ms=_now())
        )
    if not result.rowcount:
        raise TokenNotFound(f"no live token named {name_or_id!r}")
    return int(result.rowcount)


def read_token_file(path: Path) -> str:
    """The secret in a token file (``WAI_ADMIN_TOKEN_FILE``): its one line, stripped."""
    try:
        secret = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"admin token file {path}: does not read ({exc})") from None
    if not secret or not secret.isprintable() or len(secret) > 1024:
        raise TokenError(f"admin token file {path}: not one line of printable text")
    return secret


def ensure_admin(store: ReportStore, data_dir: Path, token_file: Path | None = None) -> Path | None:
    """With ``token_file`` (``WAI_ADMIN_TOKEN_FILE``, the same secret mounted into every
    replica): its token is put into the token table as an admin token named ``admin`` unless
    there already (a token revoked there stays revoked); nothing is written; ``None``.

    Without it, on a store with no live admin token: create one, write it to
    ``<data_dir>/admin-token`` (mode 0600) and return that path; else ``None``."""
    table = TokenRow.__table__
    if token_file is not None:
        secret = read_token_file(token_file)
        row = {"name": "admin", "role": Role.admin.name, "hash": digest(secret)}
        try:
            with store.engine.begin() as conn:
                known = conn.execute(select(table.c.id).where(table.c.hash == row["hash"])).first()
                if known is None:
                    conn.execute(insert(TokenRow).values(**row, created_ms=_now()))
        except IntegrityError:
            pass  # another replica, starting at the same time, put it there
        return None
    with store.engine.connect() as conn:
        live = conn.execute(
            select(table.c.id).where(table.c.role == "admin", table.c.revoked_ms.is_(None))
        ).first()
    if live is not None:
        return None
    secret = create(store, "admin", Role.admin)
    path = data_dir / ADMIN_TOKEN_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    os.replace(tmp, path)
    return path


def admin_note(store: ReportStore, token_file: Path | None) -> str:
    """What every replica's start says of the admin token, from the token table (and
    ``WAI_ADMIN_TOKEN_FILE``), never from a local file, so that every replica says the same."""
    table = TokenRow.__table__
    try:
        with store.engine.connect() as conn:
            live = conn.execute(
                select(table.c.hash).where(table.c.role == "admin", table.c.revoked_ms.is_(None))
            ).all()
    except SQLAlchemyError:
        return "unknown: the report store is down"
    if token_file is not None:
        try:
            mine = digest(read_token_file(token_file))
        except TokenError as exc:
            return exc.message
        state = "live" if any(h == mine for (h,) in live) else "not live (revoked)"
        return f"the one in {token_file} (WAI_ADMIN_TOKEN_FILE), {state} in the token table"
    if not live:
        return "none live: create one with `wai-dispatch tokens create NAME --role admin`"
    return (
        f"{len(live)} live in the token table (`wai-dispatch tokens list`; "
        "another: `wai-dispatch tokens create NAME --role admin`)"
    )


class TokenCache:
    """Hash → principal for every live token, as the store said at most ``refresh_s`` ago.

    Every lookup checks the view's age first: a view older than ``refresh_s`` (the setting
    ``token_refresh_s``) is reloaded before the lookup answers, synchronously and once for all
    the requests waiting on it, so a token revoked in the store (by any replica or process) is
    refused by every request that starts ``refresh_s`` after the revocation, the first after
    an idle period included. A token not in the view reloads it at once (a token created since),
    at most once a second. A store that is down leaves the last view in force (sinks keep
    decoding through an outage; a revocation cannot be made meanwhile) and is asked again at
    most every ``refresh_s``, so an outage does not stall every request.

    With ``snapshot`` (``<spool_dir>/tokens.snapshot``, on the volume the replicas share), the
    view read from the store is written there (:mod:`service.store.bearer_snapshot`), and a
    replica that cannot read the store takes a verified snapshot at most
    ``snapshot_max_age_s`` old that is newer than its own view (a replica started in an
    outage; one cut off from the store while the others reach it): a token revoked there is
    refused (401), one it lacks cannot be checked (503)."""

    def __init__(
        self,
        store: ReportStore,
        refresh_s: float = 2.0,
        *,
        snapshot: Path | None = None,
        snapshot_max_age_s: float = 3600.0,
    ) -> None:
        self.store = store
        self.refresh_s = refresh_s
        self.snapshot = snapshot if snapshot_max_age_s > 0 else None
        self.snapshot_max_age_s = snapshot_max_age_s
        #: Whether the last read of the store answered: while it does not, a token missing
        #: from the view cannot be checked (:meth:`lookup` raises :class:`TokenStoreDown`).
        self.store_read = False
        #: Where the view came from: ``None`` (nowhere yet), ``"store"`` or ``"snapshot"``.
        self.source: str | None = None
        self._view: dict[str, Principal] = {}
        self._revoked: set[str] = set()  # the revoked tokens' hashes
        self._view_ms: int | None = None  # when the view was the store's (Unix ms)
        self._written = -float("inf")  # when this process last wrote the snapshot (monotonic)
        self._loaded = -float("inf")  # when the view was read (monotonic)
        self._tried = -float("inf")  # when a reload was last tried
        self._lock = threading.Lock()

    def reload(self) -> bool:
        """Read the live tokens from the store; ``False`` (the view kept, or a newer verified
        snapshot taken) when it is down."""
        asked = time.monotonic()
        asked_ms = _now()
        self._tried = asked
        try:
            view, revoked = read_view(self.store)
        except SQLAlchemyError:
            self.store_read = False
            self._take_snapshot()
            return False
        self.store_read = True
        changed = view != self._view or revoked != self._revoked or self.source != "store"
        self._view, self._revoked = view, revoked
        self._view_ms = asked_ms
        self.source = "store"
        self._loaded = asked  # the view is as fresh as the moment it was asked for
        due = changed or asked - self._written > self.snapshot_max_age_s / 4
        path = self.snapshot
        if (
            path is not None
            and due
            and write_snapshot(path, self.store.url, view, revoked, asked_ms)
        ):
            self._written = asked
        return True

    def _take_snapshot(self) -> None:
        if self.snapshot is None:
            return
        found = bearer_snapshot.read(self.snapshot, self.store.url, self.snapshot_max_age_s)
        if found is None or (self._view_ms is not None and found.written_ms <= self._view_ms):
            return
        self._view = {h: Principal(n, Role[r]) for h, n, r in found.rows}
        self._revoked = set(found.revoked)
        self._view_ms = found.written_ms
        self.source = "snapshot"

    def _refresh(self, older_than: float) -> None:
        """Reload unless the view (or a failed try) is younger than ``older_than`` seconds;
        one reload at a time, the others waiting for it and then reading its view."""
        with self._lock:
            now = time.monotonic()
            if now - max(self._loaded, self._tried) > older_than:
                self.reload()

    def needs_store(self, secret: str) -> bool:
        """Whether :meth:`lookup` of ``secret`` may read the store (the view is due for its
        refresh, or the token is not in it): else the lookup is a dictionary's, and an
        event loop may make it without handing it to a thread."""
        return time.monotonic() - self._loaded > self.refresh_s or digest(secret) not in self._view

    def lookup(self, secret: str) -> Principal | None:
        """The live token's principal, ``None`` for a token the store says is not live, or
        :class:`TokenStoreDown` for one this replica cannot check: not in its view while the
        store does not answer (a replica started in an outage without a verified snapshot, or
        a token created since the view was read) — a 401 would tell the client its token is
        wrong, so it would stop; a token the view knows as revoked is ``None``."""
        key = digest(secret)
        if time.monotonic() - self._loaded > self.refresh_s:
            self._refresh(self.refresh_s)
        elif key not in self._view:
            self._refresh(1.0)  # a token created since: look now (a bad token waits for this)
        found = self._view.get(key)
        if found is None and not self.store_read and key not in self._revoked:
            raise TokenStoreDown(
                "this replica cannot check the bearer token now: the token store does not "
                "answer; retry later"
            )
        return found


def read_view(store: ReportStore) -> tuple[dict[str, Principal], set[str]]:
    """The store's live tokens (hash → principal) and the hashes of its revoked ones."""
    table = TokenRow.__table__
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(table.c.hash, table.c.name, table.c.role, table.c.revoked_ms)
        ).all()
    live = {
        h: Principal(n, Role[r]) for h, n, r, gone in rows if gone is None and r in Role.__members__
    }
    return live, {h for h, _, _, gone in rows if gone is not None}


def write_snapshot(
    path: Path, url: str, view: dict[str, Principal], revoked: set[str], now_ms: int
) -> bool:
    rows = [(h, p.name, p.role.name) for h, p in view.items()]
    return bearer_snapshot.write(path, rows, revoked, url, now_ms)


def rewrite_snapshot(store: ReportStore, path: Path) -> str | None:
    """Write the snapshot from the token table (``wai-dispatch tokens create|revoke``); why
    not, when its folder is not on this host (the spool volume is not mounted here: the
    snapshot a replica started in an outage reads is then not this command's) or refused it."""
    if not path.parent.is_dir():
        return f"{path.parent} is not a folder here (WAI_SPOOL_DIR: the fleet's spool volume)"
    view, revoked = read_view(store)
    if not write_snapshot(path, store.url, view, revoked, _now()):
        return f"{path} was not written (logged why)"
    return None


class TokenStoreDown(Unavailable, StoreError):
    """a bearer token this replica cannot check: the token store does not answer and the token is
    in no view this replica holds; retry after Retry-After (never an unknown-token refusal)"""

    code = "token_store_down"
    retry_after_s = 5


def _now() -> int:
    return int(time.time() * 1000)
