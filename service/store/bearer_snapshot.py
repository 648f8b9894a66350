"""The token snapshot on the shared spool volume: what a replica started in a store outage
checks bearer tokens against. Its contents, its key (``tokens.snapshot.key``, random, per
volume), who writes it and when a reader takes it: docs/service.md, "The token snapshot"."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wai_dispatch.codec.sets.regular import atomic_write
from wai_dispatch.dispatch import strictjson

__all__ = ["FILE", "FORMAT", "KEY_FILE", "MAX_BYTES", "Snapshot", "read", "read_regular", "write"]

log = logging.getLogger("wai_dispatch.tokens")

FORMAT = "wai-token-snapshot/2"
#: The snapshot's name on the spool volume, and its key's beside it.
FILE = "tokens.snapshot"
KEY_FILE = "tokens.snapshot.key"
#: The largest snapshot read; a bigger file is refused from its ``fstat``.
MAX_BYTES = 64 * 1024 * 1024
#: A snapshot written this far in the future (another host's clock) is still taken.
SKEW_MS = 60_000
_HASH = re.compile(r"[0-9a-f]{64}")
_ROLES = frozenset({"sink", "operator", "admin"})
#: A token: its SHA-256, its name, its role's name.
Row = tuple[str, str, str]


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot: its live tokens, the hashes of the revoked ones, when written."""

    rows: tuple[Row, ...]
    revoked: frozenset[str]
    written_ms: int


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file (not a link, a FIFO or a device) of at
    most ``limit`` bytes, judged by ``fstat`` before any read; else :class:`OSError`."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if st.st_size > limit:
            raise OSError(f"{path} holds {st.st_size} bytes, over {limit}")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(f"{path} grew over {limit} bytes")
    return data


def _key(folder: Path, database_url: str, *, create: bool) -> bytes | None:
    """The MAC key of the snapshots on this volume for this store; ``None`` when the volume
    has no key (and ``create`` is off) or its key file is unsafe (why, logged)."""
    path = folder / KEY_FILE
    if create and not path.exists():
        _create_key(path)
    try:
        secret = read_regular(path, 128).strip()
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("token snapshot key %s not used: %s", path, exc)
        return None
    if mode & 0o077 or not _HASH.fullmatch(secret.decode("ascii", "replace")):
        log.warning("token snapshot key %s not used: not 64 hex digits of mode 0600", path)
        return None
    material = "\0".join((FORMAT, database_url, secret.decode()))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).digest()


def _create_key(path: Path) -> None:
    """Write a fresh key unless one is there: a link from a whole temporary file, so writers
    starting at once keep the first one's key."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    except OSError as exc:
        log.warning("token snapshot key %s not written: %s", path, exc)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _mac(mac_key: bytes, body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(mac_key, text.encode(), hashlib.sha256).hexdigest()


def write(
    path: Path, rows: list[Row], revoked: set[str], database_url: str, now_ms: int | None = None
) -> bool:
    """Write the snapshot atomically (a unique temporary file, then a rename, under an
    exclusive ``flock`` of the key file), unless the one there was written later; ``False``
    when the volume refused it (a full disk: the view in memory still holds)."""
    mac_key = _key(path.parent, database_url, create=True)
    if mac_key is None:
        return False
    written_ms = int(time.time() * 1000) if now_ms is None else now_ms
    body = {
        "format": FORMAT,
        "written_ms": written_ms,
        "tokens": [list(r) for r in sorted(rows)],
        "revoked": sorted(revoked),
    }
    data = json.dumps({**body, "mac": _mac(mac_key, body)}).encode()
    try:
        lock = os.open(path.parent / KEY_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            there = _verified(path, mac_key, now=written_ms)
            if isinstance(there, Snapshot) and there.written_ms > written_ms:
                return True  # a later view is there already
            atomic_write(path, data)  # a unique temporary file (mode 0600), then a rename
        finally:
            os.close(lock)
    except OSError as exc:
        log.warning("token snapshot %s not written: %s", path, exc)
        return False
    return True


def read(
    path: Path, database_url: str, max_age_s: float, now_ms: int | None = None
) -> Snapshot | None:
    """The snapshot when it is verified and recent, else ``None`` (why, logged)."""
    mac_key = _key(path.parent, database_url, create=False)
    if mac_key is None:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    found = _verified(path, mac_key, now=now)
    if isinstance(found, Snapshot) and now - found.written_ms > max_age_s * 1000:
        age = (now - found.written_ms) / 1000
        found = f"written {age:.0f} s ago, over token_snapshot_max_age_s={max_age_s:g}"
    if isinstance(found, str):
        log.warning("token snapshot %s not used: %s", path, found)
        return None
    return found


def _verified(path: Path, mac_key: bytes, *, now: int) -> Snapshot | str | None:
    try:
        raw = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"not read: {exc}"
    try:
        doc = strictjson.loads(raw)
    except ValueError:
        return "not JSON"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return f"not a {FORMAT} document"
    mac = doc.get("mac")
    body = {k: v for k, v in doc.items() if k != "mac"}
    if set(body) != {"format", "written_ms", "tokens", "revoked"} or not isinstance(mac, str):
        return "its fields are not the format's"
    if not hmac.compare_digest(mac, _mac(mac_key, body)):
        return "its MAC does not check (written for another store, or changed since)"
    written = body["written_ms"]
    if not isinstance(written, int) or isinstance(written, bool):
        return "no time of writing"
    if written > now + SKEW_MS:
        return "written in the future"
    return _rows(body["tokens"], body["revoked"], written)


def _rows(tokens: Any, revoked: Any, written: int) -> Snapshot | str:
    rows: list[Row] = []
    for row in tokens if isinstance(tokens, list) else [None]:
        if not (
            isinstance(row, list)
            and len(row) == 3
            and all(isinstance(v, str) for v in row)
            and _HASH.fullmatch(row[0])
            and row[2] in _ROLES
        ):
            return "a token row is not a hash, a name and a role"
        rows.append((row[0], row[1], row[2]))
    if not isinstance(revoked, list) or not all(
        isinstance(h, str) and _HASH.fullmatch(h) for h in revoked
    ):
        return "the revoked tokens are not a list of hashes"
    return Snapshot(tuple(rows), frozenset(revoked), written)
