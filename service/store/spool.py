"""The durable local spool: reports the store could not take, kept on disk until it can.

Two files of JSON lines (each line one decode's records) in the spool folder: ``reports.jsonl``
takes new lines, appended whole and fsync'd before the decode answers (a write that fails or
comes up short is cut back to the file's previous size and raises :class:`SpoolWriteFailed`, so
no fragment stays for the next line to land on); ``reports.draining.jsonl`` is the file being
replayed. The recorder's thread (service/store/recorder.py) renames the first to the second
(under the spool's lock, so new lines go on landing in a fresh ``reports.jsonl`` while it
drains), inserts its lines into the store in batches of up to :data:`BATCH_RECORDS` records
per transaction, and removes it once every line is in. The store skips a report whose id or
identity it already holds, so a line replayed twice (a crash mid-replay, a commit whose answer
was lost) is stored once. ``spool_max_bytes`` bounds the file that takes new lines (the one
draining is already bounded by it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.errors import Unavailable

log = logging.getLogger("wai_dispatch.spool")

#: Records inserted per transaction when the spool is replayed.
BATCH_RECORDS = 500
#: Free bytes on the spool's filesystem under which a failed spool stays failed (``/readyz``).
MIN_FREE_BYTES = 1 << 20
#: The file every live writer of a spool folder holds a shared ``flock`` on.
OWNER_LOCK = "owner.lock"
#: The room ``/readyz`` wants for the next decode's line (unless a larger one was taken): a
#: decode's line is its reports' records, a few KiB.
NEXT_LINE_BYTES = 64 * 1024


def fits(used: int, line: int, max_bytes: int) -> bool:
    """Whether a line of ``line`` bytes goes into the file taking new lines, which holds
    ``used``: the one rule of :meth:`Spool.append` and of :meth:`Spool.takes_next`."""
    return used + line <= max_bytes


class SpoolFull(Unavailable):
    """the store is down and the spool is at spool_max_bytes: decodes wait"""

    code = "report_spool_full"
    retry_after_s = 5


class SpoolWriteFailed(Unavailable):
    """the store is down and the spool cannot write (its disk is full): nothing was stored; retry
    after Retry-After"""

    code = "report_spool_failed"
    retry_after_s = 5


class Spool:
    """An append-only, fsync'd file of JSON lines with a byte bound, and the file it drains."""

    def __init__(self, directory: Path, max_bytes: int, *, owned: bool = True) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.path = directory / "reports.jsonl"
        self.draining = directory / "reports.draining.jsonl"
        self.max_bytes = max_bytes
        #: Why the last append failed (``None`` once a line went in, or space came back).
        self.failed: str | None = None
        self.largest = NEXT_LINE_BYTES  # the room the next line wants (``/readyz``)
        self._lock = threading.Lock()
        self._closed = False
        self._drain_lock = threading.Lock()
        self._lock_fd = os.open(directory / "spool.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._drain_fd = os.open(directory / "drain.lock", os.O_RDWR | os.O_CREAT, 0o600)
        #: Held shared for the spool's life by every process writing to it (``serve --workers
        #: N`` share one): a folder whose owner lock can be taken exclusively has no live
        #: writer, and another replica may adopt it (:mod:`~service.store.spool_volume`).
        self._owner_fd: int | None = None
        if owned:
            self._owner_fd = os.open(directory / OWNER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._owner_fd, fcntl.LOCK_SH)
        self._fd = self._open()

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)

    def _current(self) -> None:
        """Under the lock: reopen ``reports.jsonl`` when another process renamed it away."""
        try:
            same = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(self._fd)
            self._fd = self._open()

    def size(self) -> int:
        """Bytes waiting for the store: the file taking lines and the one draining, read under
        the lock that renames the first to the second (else a rename between the two reads
        counts the same lines twice; once closed, nothing renames them)."""
        if self._closed:
            return _size(self.path) + _size(self.draining)
        with self._locked():
            return _size(self.path) + _size(self.draining)

    def empty(self) -> bool:
        """Whether no line waits for the store (:meth:`size` is 0), without the lock: the
        recorder asks it for every decode, and 64 threads taking a lock and ``flock`` for it
        queued behind one another. The file taking lines is read first, then the one draining:
        a line waiting through both reads is in the first at the first read, or was renamed
        into the second (only ever that way, and only when no second exists) and is removed
        from it only once stored. A line appended meanwhile lands before or after the answer,
        as it would beside the lock."""
        return not (_size(self.path) or _size(self.draining))

    def new_bytes(self) -> int:
        """Bytes in the file taking new lines (the one ``spool_max_bytes`` bounds)."""
        return _size(self.path)

    def takes_next(self) -> bool:
        """Whether the next decode's line fits (``/readyz``): a line of :data:`NEXT_LINE_BYTES`,
        or of the largest this spool took, by :func:`fits`."""
        return fits(self.new_bytes(), self.largest, self.max_bytes)

    def append(self, records: list[dict[str, Any]]) -> None:
        """Write the line whole and fsync it, or raise with nothing of it left in the file."""
        line = json.dumps(records, separators=(",", ":")).encode() + b"\n"
        self.largest = max(self.largest, len(line))
        with self._locked():
            self._current()
            before = os.fstat(self._fd).st_size
            if not fits(before, len(line), self.max_bytes):
                raise SpoolFull(
                    f"the report store is down and the spool holds {before} bytes "
                    f"(limit spool_max_bytes={self.max_bytes})"
                )
            try:
                view = memoryview(line)
                while view:
                    n = os.write(self._fd, view)
                    if n <= 0:
                        raise OSError(errno.ENOSPC, "a write of 0 bytes")
                    view = view[n:]
                os.fsync(self._fd)
            except OSError as exc:
                self._cut(before)
                self.failed = exc.strerror or str(exc)
                log.error("spool: a line of %d bytes not written: %s", len(line), self.failed)
                raise SpoolWriteFailed(
                    f"the report store is down and the spool cannot write a report "
                    f"({self.failed}); nothing was stored, retry later"
                ) from None
            self.failed = None

    def _cut(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError as exc:  # the next append's size check still sees the fragment
            log.error("spool: cannot cut the file back to %d bytes: %s", size, exc)

    def healthy(self) -> bool:
        """Whether the spool can take a line: no failed append, or the filesystem has room
        again (at least :data:`MIN_FREE_BYTES` free)."""
        if self.failed is None:
            return True
        try:
            st = os.statvfs(self.directory)
        except OSError:
            return False
        if st.f_bavail * st.f_frsize >= MIN_FREE_BYTES:
            self.failed = None
        return self.failed is None

    def probe(self) -> str | None:
        """Whether a line can go in now, asked of the filesystem (``/readyz``): ``None``, or
        why a small file cannot be written and removed in the spool's folder."""
        probe = self.directory / f".probe-{os.getpid()}-{threading.get_ident()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, b"\n")
            finally:
                os.close(fd)
            probe.unlink()
        except OSError as exc:
            return exc.strerror or str(exc)
        return None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This process's threads and the other server processes (``serve --workers N``
        share the folder) one at a time: an append never lands in a file being renamed."""
        with self._lock:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _rotate(self) -> bool:
        """Under the lock: make ``reports.jsonl`` the file to drain (unless one is draining)
        and open a fresh one for new lines; whether there is a file to drain."""
        with self._locked():
            if self.draining.exists():
                return True
            self._current()
            if os.fstat(self._fd).st_size == 0:
                return False
            os.rename(self.path, self.draining)
            _fsync_dir(self.directory)
            os.close(self._fd)
            self._fd = self._open()
            return True

    def replay(
        self,
        insert: Callable[[list[dict[str, Any]]], int],
        batch_records: int = BATCH_RECORDS,
    ) -> int:
        """Hand every spooled record to ``insert`` in order, in batches of up to
        ``batch_records`` records (whole lines); remove each drained file once all its lines
        went in. Raises what ``insert`` raises (the draining file is then kept whole: a later
        replay starts it again). New lines keep landing while it runs. Returns the count
        ``insert`` reported; 0 at once when another process is draining."""
        with self._drain_lock:
            try:
                fcntl.flock(self._drain_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0
            try:
                done = 0
                while self._rotate():
                    done += self._drain(insert, batch_records)
                    with self._locked():
                        self.draining.unlink(missing_ok=True)
                        _fsync_dir(self.directory)
                return done
            finally:
                fcntl.flock(self._drain_fd, fcntl.LOCK_UN)

    def _drain(self, insert: Callable[[list[dict[str, Any]]], int], batch_records: int) -> int:
        done = 0
        batch: list[dict[str, Any]] = []
        with open(self.draining, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    # only a line whose write never finished (a crash before its fsync):
                    # never acknowledged, since a failed append is cut back
                    log.warning("spool: skipping an unfinished line of %d bytes", len(raw))
                    break
                try:
                    records = strictjson.loads(raw)
                except ValueError:  # torn by a crash before its fsync: never acknowledged
                    log.warning("spool: skipping a torn line of %d bytes", len(raw))
                    continue
                if batch and len(batch) + len(records) > batch_records:
                    done += insert(batch)
                    batch = []
                batch.extend(records)
        if batch:
            done += insert(batch)
        return done

    def close(self) -> None:
        self._closed = True
        os.close(self._fd)
        os.close(self._lock_fd)
        os.close(self._drain_fd)
        if self._owner_fd is not None:
            os.close(self._owner_fd)  # releases the owner lock


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except (FileNotFoundError, NotADirectoryError):  # no file (its folder gone): nothing waits
        return 0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
