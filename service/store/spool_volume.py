"""The spool volume: one folder (``spool_dir``, a volume the replicas can share) holding a spool
folder per replica, ``<spool_dir>/<replica_id>/``, and the adoption of the ones left behind.

A replica writes only to its own folder, and holds that folder's owner lock (a shared
``flock`` on ``owner.lock``) for as long as it runs; ``serve --workers N`` share one folder, as
they share one replica id. A folder whose owner lock can be taken *exclusively* has no live
writer: its replica died (SIGKILL, a lost node) or was scaled away with reports still spooled.
Any replica on the volume adopts such a folder: it holds the exclusive lock, replays the
folder's files into the store through the same batched replay as its own spool, and leaves the
folder empty (a restarted owner, whose shared lock waits on the adopter's exclusive one, finds
nothing left to replay). The store skips a report id it already holds, so a report replayed by
its owner and by an adopter, or twice after a crash mid-replay, is stored once.

A spool written by a version that kept its files at the top of the folder (no replica folders)
is adopted the same way: the top folder has no live owner.

``flock`` holds across processes on one host and, on Linux, over NFSv4 (the client maps it to
POSIX byte-range locks); a volume whose filesystem has no working locks cannot share spools.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from wai_dispatch.service.store.spool import OWNER_LOCK, Spool

__all__ = ["SpoolVolume", "default_replica_id"]

log = logging.getLogger("wai_dispatch.spool")

_FILES = ("reports.jsonl", "reports.draining.jsonl")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_replica_id() -> str:
    """This host's name, as a folder name: the replica id when none is configured."""
    return _UNSAFE.sub("_", socket.gethostname()).strip("._") or "replica"


class SpoolVolume:
    """The spool folder of every replica on one volume; :attr:`own` is this replica's."""

    def __init__(self, root: Path, replica_id: str, max_bytes: int) -> None:
        if not replica_id or _UNSAFE.search(replica_id) or replica_id.strip(".") == "":
            raise ValueError(f"replica id {replica_id!r}: letters, digits, '.', '_', '-' only")
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.replica_id = replica_id
        self.max_bytes = max_bytes
        self.own = Spool(root / replica_id, max_bytes)

    def orphans(self) -> list[Path]:
        """Spool folders on the volume with reports waiting and no live writer (checked
        again, under the exclusive lock, when adopted)."""
        found = []
        for folder in [self.root, *sorted(p for p in self.root.iterdir() if p.is_dir())]:
            if folder == self.own.directory or not _has_reports(folder):
                continue
            with _exclusive(folder) as free:
                if free:
                    found.append(folder)
        return found

    def adopt(self, insert: Callable[[list[dict[str, Any]]], int]) -> int:
        """Replay every orphaned spool on the volume into the store through ``insert``;
        the count ``insert`` reported. Raises what ``insert`` raises (the orphan's files are
        then kept whole, for the next adoption)."""
        done = 0
        for folder in self.orphans():
            with _exclusive(folder) as free:
                if not free:  # its owner came back, or another replica is adopting it
                    continue
                spool = Spool(folder, self.max_bytes, owned=False)
                try:
                    n = spool.replay(insert)
                finally:
                    spool.close()
                done += n
                log.warning(
                    "spool: adopted the orphaned spool %s: %d report(s) replayed",
                    folder.name if folder != self.root else "(top level)",
                    n,
                )
        return done

    def close(self) -> None:
        self.own.close()


def _has_reports(folder: Path) -> bool:
    for name in _FILES:
        with contextlib.suppress(FileNotFoundError):
            if (folder / name).stat().st_size > 0:
                return True
    return False


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[bool]:
    """Whether the folder's owner lock could be taken exclusively (held inside the block)."""
    try:
        fd = os.open(folder / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
