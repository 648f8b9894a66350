"""Group commit: the reports of concurrent requests stored in one transaction.

Each request hands its records to :meth:`GroupCommit.submit` and waits; a committer thread
takes every request waiting (up to ``max_records`` records, whole requests) and stores them in
one transaction (:meth:`ReportStore.record <service.store.report_store.ReportStore.record>`,
service/store/bulk.py): one ``fsync`` for the batch instead of one per request, and far fewer
transactions contending for the same roll-up rows.
``submit`` returns only once the transaction holding its records has committed, so an
acknowledged report is durable exactly as with one transaction per request.

When a batch is taken: once ``window_s`` has passed since its first request arrived, or at once
when it holds ``max_records``. A lone writer pays no window: while the batches hold one
request each, each is committed at once; the window is waited only after a batch of several
(requests are arriving together). Requests that arrive while a batch commits form the next
one, so under load a batch is about one commit's worth of arrivals. With several committers
(PostgreSQL: two) one takes and sends the next batch while another's commit completes; the
batches' reports and shared roll-up rows are written in one key order
(service/store/bulk_pg.py), so the later waits for the earlier's commit there. (A deadlock the
server still found would be an ``OperationalError``: the batch's requests spool their records,
and the replay stores them.)

A batch that fails: the store down (the connection refused, a lock not granted: an
``OperationalError``) fails every request of it with :class:`StoreDown` (each spools its own
records, service/store/spool.py); any other database error is one request's bad row, so its
requests are retried one transaction each and only that one fails.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import StoreDown

__all__ = ["GroupCommit"]

log = logging.getLogger("wai_dispatch.group_commit")

#: The causes of a :class:`StoreDown` that say the store itself is unreachable (not a row).
_DOWN = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout)


class _Pending:
    """One request's records (and their rows, when the request made them), waiting for the
    commit that holds them."""

    __slots__ = ("at", "done", "error", "ids", "records", "rows")

    def __init__(self, records: Sequence[ReportRecord], rows: Sequence[Any] | None) -> None:
        self.records = records
        self.rows = rows
        self.at = time.monotonic()
        self.done = threading.Event()
        self.ids: list[str] = []
        self.error: BaseException | None = None


#: What stores a batch: its records and, when every request made them, their rows (``None``
#: otherwise) in; each record's stored id out; :class:`StoreDown` when it cannot.
Commit = Callable[[Sequence[ReportRecord], Sequence[Any] | None], list[str]]


class GroupCommit:
    """Stores many requests' records per transaction through ``commit`` (:data:`Commit`), with
    ``committers`` threads: each takes the next batch while the others' commit (PostgreSQL:
    a batch's rows go in while the one before waits for its ``fsync``; SQLite takes one
    writer at a time, so one)."""

    def __init__(
        self,
        commit: Commit,
        *,
        window_s: float = 0.002,
        max_records: int = 1000,
        committers: int = 1,
    ) -> None:
        self._commit = commit
        self.window_s = window_s
        self.max_records = max_records
        self._cond = threading.Condition()
        self._queue: deque[_Pending] = deque()
        self._queued = 0  # records in the queue
        self._closed = False
        self._grouping = False  # the last batch held several requests: wait the window
        #: Transactions committed and requests they held (``/metrics``, the bench).
        self.batches = 0
        self.requests = 0
        self._count = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, name=f"report-commit-{i}", daemon=True)
            for i in range(max(1, committers))
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, records: Sequence[ReportRecord], rows: Sequence[Any] | None = None
    ) -> list[str]:
        """Store ``records`` (one request's; ``rows``: what ``commit`` takes for them, made
        in the caller's thread) in the next batch; returns each record's stored id once that
        batch has committed, or raises what storing it raised."""
        return self.enqueue(records, rows)()

    def enqueue(
        self, records: Sequence[ReportRecord], rows: Sequence[Any] | None = None
    ) -> Callable[[], list[str]]:
        """Put ``records`` (one request's; ``rows`` as for :meth:`submit`) in the next batch
        and return at once: the function returned waits for that batch's commit and returns
        each record's stored id, or raises what storing it raised (the caller works meanwhile:
        the decode makes its picture)."""
        pending = _Pending(records, rows)
        with self._cond:
            if self._closed:
                ids = self._commit(records, rows)
                return lambda: ids
            wake = not self._queue or self._queued + len(records) >= self.max_records
            self._queue.append(pending)
            self._queued += len(records)
            if wake:
                self._cond.notify()

        def wait() -> list[str]:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            return pending.ids

        return wait

    def _take(self) -> list[_Pending] | None:
        """The next batch (``None``: closed, nothing left), once its window has passed or it
        is full."""
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            if self._grouping and self.window_s > 0:
                deadline = self._queue[0].at + self.window_s
                while self._queued < self.max_records and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            batch: list[_Pending] = []
            n = 0
            while self._queue and (
                not batch or n + len(self._queue[0].records) <= self.max_records
            ):
                pending = self._queue.popleft()
                n += len(pending.records)
                batch.append(pending)
            self._queued -= n
            self._grouping = len(batch) > 1
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            try:
                self._store(batch)
            except BaseException as exc:  # never leave a request waiting
                log.exception("group commit: a batch of %d request(s) failed", len(batch))
                for pending in batch:
                    if not pending.done.is_set():
                        pending.error = exc
                        pending.done.set()

    def _store(self, batch: list[_Pending]) -> None:
        records = [r for pending in batch for r in pending.records]
        rows = None
        if all(pending.rows is not None for pending in batch):
            rows = [row for pending in batch for row in pending.rows or ()]
        try:
            ids = self._commit(records, rows)
        except StoreDown as exc:
            if len(batch) == 1 or isinstance(exc.__cause__, _DOWN):
                for pending in batch:
                    pending.error = exc
                    pending.done.set()
                return
            log.warning("group commit: a batch of %d requests failed (%s); storing each on "
                        "its own", len(batch), exc)  # fmt: skip
            for pending in batch:
                try:
                    pending.ids = self._commit(pending.records, pending.rows)
                except StoreDown as one:
                    pending.error = one
                pending.done.set()
            return
        with self._count:
            self.batches += 1
            self.requests += len(batch)
        at = 0
        for pending in batch:
            pending.ids = ids[at : at + len(pending.records)]
            at += len(pending.records)
            pending.done.set()

    def close(self) -> None:
        """Commit what waits, then stop the committer (later submits commit in their own
        thread)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)
