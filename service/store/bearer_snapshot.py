"""The token snapshot on the shared volume: what a replica started in a store outage checks
bearer tokens against (issue 29, item 4).

Every replica that reads the token store writes the live tokens it read to
``<spool_dir>/tokens.snapshot`` (the volume the replicas share; mode 0600): each token's SHA-256
(never a secret), its name (the sink id its reports are filed under, as every spooled report
already carries) and its role, when it was written, and an HMAC-SHA256 over all of it. A
replica that cannot read the store, and holds no view of its own, takes the snapshot only when
it is *verified* and *recent*:

- its MAC checks under this replica's key, derived from the database URL (its password
  included) and, when set, the admin token file's secret (:func:`key`): a snapshot written for
  another store, torn, or edited on the volume (a role raised, a hash added) is refused;
- it was written at most ``token_snapshot_max_age_s`` ago (and not in the future beyond a
  minute of clock skew).

Otherwise it is ignored, and the replica answers every token 503 ``token_store_down`` with
``Retry-After`` until the store answers (never 401). The snapshot is rewritten when the view
read from the store changes (a token created or revoked) and when the one on the volume is
older than a quarter of the age bound, so a running fleet keeps it recent."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wai_dispatch.dispatch import strictjson

__all__ = ["FILE", "FORMAT", "Snapshot", "key", "read", "write"]

log = logging.getLogger("wai_dispatch.tokens")

FORMAT = "wai-token-snapshot/1"
#: The snapshot's name on the spool volume.
FILE = "tokens.snapshot"
#: A snapshot written this far in the future (another host's clock) is still taken.
SKEW_MS = 60_000
_HASH = re.compile(r"[0-9a-f]{64}")
_ROLES = frozenset({"sink", "operator", "admin"})
#: A token: its SHA-256, its name, its role's name.
Row = tuple[str, str, str]


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot: its tokens and when it was written (Unix ms)."""

    rows: tuple[Row, ...]
    written_ms: int


def key(database_url: str, admin_secret: str | None = None) -> bytes:
    """The MAC key of this fleet's snapshots: every replica of one store derives the same."""
    material = "\0".join((FORMAT, database_url, admin_secret or ""))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).digest()


def _mac(mac_key: bytes, body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(mac_key, text.encode(), hashlib.sha256).hexdigest()


def write(path: Path, rows: list[Row], mac_key: bytes, now_ms: int | None = None) -> bool:
    """Write the snapshot atomically (a unique temporary file, then a rename: replicas
    writing at once leave one whole snapshot); ``False`` when the volume refused it (a full
    disk: the view in memory still holds)."""
    body = {
        "format": FORMAT,
        "written_ms": int(time.time() * 1000) if now_ms is None else now_ms,
        "tokens": [list(r) for r in sorted(rows)],
    }
    data = json.dumps({**body, "mac": _mac(mac_key, body)}).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("token snapshot %s not written: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def read(
    path: Path, mac_key: bytes, max_age_s: float, now_ms: int | None = None
) -> Snapshot | None:
    """The snapshot when it is verified and recent, else ``None`` (why, logged)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("token snapshot %s not read: %s", path, exc)
        return None
    why = _refusal(raw, mac_key, max_age_s, now)
    if isinstance(why, str):
        log.warning("token snapshot %s not used: %s", path, why)
        return None
    return why


def _refusal(raw: bytes, mac_key: bytes, max_age_s: float, now: int) -> Snapshot | str:
    if len(raw) > 64 * 1024 * 1024:
        return "over 64 MiB"
    try:
        doc = strictjson.loads(raw)
    except ValueError:
        return "not JSON"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return f"not a {FORMAT} document"
    mac = doc.get("mac")
    body = {k: v for k, v in doc.items() if k != "mac"}
    if set(body) != {"format", "written_ms", "tokens"} or not isinstance(mac, str):
        return "its fields are not the format's"
    if not hmac.compare_digest(mac, _mac(mac_key, body)):
        return "its MAC does not check (written for another store, or changed since)"
    written = body["written_ms"]
    if not isinstance(written, int) or isinstance(written, bool):
        return "no time of writing"
    if written > now + SKEW_MS:
        return "written in the future"
    if now - written > max_age_s * 1000:
        age = (now - written) / 1000
        return f"written {age:.0f} s ago, over token_snapshot_max_age_s={max_age_s:g}"
    rows: list[Row] = []
    for row in body["tokens"] if isinstance(body["tokens"], list) else [None]:
        if not (
            isinstance(row, list)
            and len(row) == 3
            and all(isinstance(v, str) for v in row)
            and _HASH.fullmatch(row[0])
            and row[2] in _ROLES
        ):
            return "a token row is not a hash, a name and a role"
        rows.append((row[0], row[1], row[2]))
    return Snapshot(tuple(rows), written)
