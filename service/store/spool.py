"""The durable local spool: reports the store could not take, kept on disk until it can.

One file of JSON lines (each line one decode's records), appended and fsync'd before the decode
answers, bounded in bytes, replayed in order by :class:`Recorder`'s thread and truncated once
every line is in the store. The store skips a report id it already holds, so a line replayed
twice (a crash mid-replay, a commit whose answer was lost) is stored once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.store.db import ReportStore, StoreDown
from wai_dispatch.service.store.records import ReportRecord

log = logging.getLogger("wai_dispatch.spool")


class SpoolFull(WaiError):
    """The store is down and the spool has reached its size: a decode now would lose its
    report, so it is refused until the store returns."""

    code = ErrorCode.REPORT_SPOOL_FULL


class Spool:
    """An append-only, fsync'd file of JSON lines with a byte bound."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "reports.jsonl"
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def append(self, records: list[dict[str, Any]]) -> None:
        line = json.dumps(records, separators=(",", ":")).encode() + b"\n"
        with self._locked():
            if self.size() + len(line) > self.max_bytes:
                raise SpoolFull(
                    f"the report store is down and the spool holds {self.size()} bytes "
                    f"(limit spool_max_bytes={self.max_bytes})"
                )
            os.write(self._fd, line)
            os.fsync(self._fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This process's threads and the other server processes (``serve --workers N``
        share the file) one at a time: an append never lands between a replay's last read
        and its truncation."""
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def replay(self, insert: Callable[[list[dict[str, Any]]], int]) -> int:
        """Hand every line to ``insert`` in order; truncate when all went in. Raises what
        ``insert`` raises (the file is then kept whole: a later replay starts again)."""
        done = 0
        offset = 0
        while True:
            with self._locked():
                size = self.size()
                if offset >= size:
                    os.ftruncate(self._fd, 0)
                    os.fsync(self._fd)
                    return done
                data = os.pread(self._fd, size - offset, offset)
            for raw in data.splitlines(keepends=True):
                if not raw.endswith(b"\n"):
                    break  # a line still being written: read it next round
                offset += len(raw)
                try:
                    records = strictjson.loads(raw)
                except ValueError:  # a line torn by a crash before its fsync: never acked
                    log.warning("spool: skipping a torn line of %d bytes", len(raw))
                    continue
                done += insert(records)

    def close(self) -> None:
        os.close(self._fd)


class Recorder:
    """Stores each decode's records: straight into the store while it answers and nothing is
    spooled, else into the spool, which a thread replays when the store is back."""

    def __init__(self, store: ReportStore, spool: Spool, *, retry_s: float = 0.5) -> None:
        self.store = store
        self.spool = spool
        self.retry_s = retry_s
        self.store_up = True
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-replay", daemon=True)
        self._thread.start()
        if spool.size():
            self.store_up = False
            self._wake.set()

    def record(self, records: list[ReportRecord]) -> None:
        if self.store_up and not self.spool.size():
            try:
                self.store.insert(records)
                return
            except StoreDown as exc:
                log.warning("report store down, spooling: %s", exc)
                self.store_up = False
        self.spool.append([r.to_json() for r in records])
        self._wake.set()

    def _insert_line(self, line: list[dict[str, Any]]) -> int:
        return self.store.insert([ReportRecord.from_json(obj) for obj in line])

    def pending_bytes(self) -> int:
        return self.spool.size()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.retry_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self.spool.size():
                continue
            try:
                n = self.spool.replay(self._insert_line)
            except StoreDown:
                self.store_up = False
                continue
            if n:
                log.info("spool: replayed %d report(s) into the store", n)
            self.store_up = True

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.spool.close()
