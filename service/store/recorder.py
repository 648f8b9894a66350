"""The recorder: where every decode's records go. Straight into the report store while it
answers and nothing is spooled (through group commit, below, or one transaction per decode),
else into the durable spool (service/store/spool.py), which the recorder's thread replays when
the store is back, migrating it first when the service started while it was down, and adopting
the orphaned spools of dead replicas on the spool volume.

Group commit (:class:`GroupCommit`): the reports of concurrent requests stored in one
transaction. Each request hands its records to :meth:`GroupCommit.submit` and waits; a
committer thread takes every request waiting (up to ``max_records`` records, whole requests)
and stores them in one transaction (:meth:`ReportStore.record
<service.store.report_store.ReportStore.record>`, service/store/bulk.py): one ``fsync`` for
the batch instead of one per request, and far fewer transactions contending for the same
roll-up rows. ``submit`` returns only once the transaction holding its records has committed, so an
acknowledged report is durable exactly as with one transaction per request.

When a batch is taken: once ``window_s`` has passed since its first request arrived, or at once
when it holds ``max_records``. A lone writer pays no window: while the batches hold one
request each, each is committed at once; the window is waited only after a batch of several
(requests are arriving together). Requests that arrive while a batch commits form the next
one, so under load a batch is about one commit's worth of arrivals. On SQLite (``inline``) a
request that finds nothing queued and nothing being committed is committed in its own thread,
no handoff to the committer (one writer is as fast as one transaction a report), when the
request waits for it at once (``Recorder.record``; a decode that makes its picture meanwhile
hands its records to the committer, service/usecase/decode.py); the requests
arriving while it commits form the next batch, which the committer takes once it is done.
With several committers (PostgreSQL: four) one takes and sends the next batch while another's
commit completes, and one at a time waits a batch's window (the others wait their turn: none
takes a batch another has just emptied); the batches' reports are written in one key order
(service/store/bulk_pg.py), so a later batch holding an identity an earlier one holds waits for
the earlier's commit there. (A deadlock the server still found would be an
``OperationalError``: the batch's requests spool their records, and the replay stores them.)
A request waits on a lock its committer releases (one lock operation a side, no condition).

A batch that fails: the store down (the connection refused, a lock not granted: an
``OperationalError``) fails every request of it with :class:`StoreDown` (each spools its own
records, service/store/spool.py); any other database error is one request's bad row, so its
requests are retried one transaction each and only that one fails.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from wai_dispatch.service.store.errors import RequestIdReused, RequestInFlight
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.spool import Spool, SpoolFull, SpoolWriteFailed

__all__ = ["PG_COMMITTERS", "Recorder"]

log = logging.getLogger("wai_dispatch.spool")

#: Group commit's committers on PostgreSQL: batches in flight at once, their commits' ``fsync``
#: shared by the server. Four over two: 1.29× the reports a second at 64 writers (median of 12
#: paired rounds, `bench store`'s writers, load average 8-10), 1.05× at 8; eight over four:
#: 1.01× (docs/scaling.md, "The store's ceiling").
PG_COMMITTERS = 4


class Recorder:
    """Stores each decode's records: straight into the store while it answers and nothing is
    spooled, else into the spool, which a thread replays when the store is back. When the
    spool cannot take a line (full, or its disk is) the store is tried once more, so a decode
    is never refused once the store is back, even while the spool still drains.

    Straight into the store is, with ``commit_window_s`` given, through group commit
    (:class:`GroupCommit`: concurrent decodes' records in one transaction, each
    decode returning once it has committed; ``commit_max`` records a batch at most;
    :data:`PG_COMMITTERS` committers on PostgreSQL, one on SQLite, unless ``committers``
    says), else one transaction per decode. The rows the store's statement takes are made in
    the decode's own thread, not the committer's.
    :meth:`record` returns the records as stored: a retried request (its identity stored
    before) gets the first decode's report ids.

    ``migrate``, when given, is run by the thread before its first replay, until it succeeds:
    a service started while its store was down migrates it when it returns. ``adopt``, when
    given (:meth:`SpoolVolume.adopt <service.store.spool_volume.SpoolVolume.adopt>`), is run
    with the store's batch insert every ``adopt_every_s`` while the store answers: the
    orphaned spools of other replicas on the volume are replayed too."""

    def __init__(
        self,
        store: ReportStore,
        spool: Spool,
        *,
        retry_s: float = 0.5,
        migrate: Callable[[], None] | None = None,
        adopt: Callable[[Callable[[list[dict[str, Any]]], int]], int] | None = None,
        adopt_every_s: float = 2.0,
        commit_window_s: float | None = None,
        commit_max: int = 1000,
        committers: int | None = None,
    ) -> None:
        self.store = store
        self.group: GroupCommit | None = None
        if commit_window_s is not None:
            self.group = GroupCommit(
                self._store_records,
                window_s=commit_window_s,
                max_records=commit_max,
                committers=committers or (PG_COMMITTERS if store.dialect == "postgresql" else 1),
                inline=store.dialect == "sqlite",
            )
        self.spool = spool
        self.retry_s = retry_s
        self._migrate = migrate
        self._adopt = adopt
        self.adopt_every_s = adopt_every_s
        self._adopt_at = 0.0
        self.store_up = migrate is None
        self._claims: dict[tuple[str, str], Callable[[], str]] = {}
        self._claims_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-replay", daemon=True)
        if spool.size() or migrate is not None:
            self.store_up = False
            self._wake.set()
        self._thread.start()

    @property
    def migrated(self) -> bool:
        return self._migrate is None

    def check(self, sink: str, request_id: str, digest: str) -> None:
        """Refuse (``request_id_reused``) a request id the store holds for another request:
        one whose reports were asked by another envelope. A store that does not answer checks
        nothing here (its spool, replayed, keeps the first report of each identity)."""
        if not self.store_up:
            return  # known down: the decode is not held up by a connect timeout
        try:
            asked = self.store.asked(sink, request_id)
        except StoreDown:
            return
        if asked is not None and asked != digest:
            raise _reused(request_id)

    @contextlib.contextmanager
    def claim(self, sink: str, request_id: str, digest: Callable[[], str]) -> Iterator[None]:
        """Hold ``(sink, request_id)`` while its decode runs here: the same request sent again
        meanwhile is ``request_in_flight`` (409, retry), another under its id
        ``request_id_reused`` (``digest``: what each asked, made only then)."""
        key = (sink, request_id)
        with self._claims_lock:
            held = self._claims.setdefault(key, digest)
        if held is not digest:
            if held() != digest():
                raise _reused(request_id)
            raise RequestInFlight(
                f"request {request_id!r} is still being decoded: retry once it has answered"
            )
        try:
            yield
        finally:
            with self._claims_lock:
                del self._claims[key]

    def record(self, records: list[ReportRecord]) -> list[ReportRecord]:
        """Store or spool ``records`` (one decode's) before returning them as stored (the
        ids the store holds for them; as given when spooled); raises a typed error when
        neither can take them."""
        return self.begin(records, now=True)()

    def begin(
        self, records: list[ReportRecord], *, now: bool = False
    ) -> Callable[[], list[ReportRecord]]:
        """:meth:`record` in two halves: ``records`` handed over now, and a function that
        returns them as stored once they are durable (or raises the typed error). Through
        group commit the handing over does not wait for the commit, so the caller works
        while the batch commits and waits only for what is left of it; otherwise the records
        are stored (or spooled) here and the function returns them at once. ``now``: the
        caller waits at once, nothing to overlap (:meth:`GroupCommit.enqueue`)."""
        if self.store_up and self.spool.empty():
            rows = self.store.rows(records)  # here, in the request's thread
            if self.group is not None:
                try:
                    wait = self.group.enqueue(records, rows, now=now)
                except StoreDown as exc:  # closed: it committed in this thread
                    stored = self._down(records, exc)
                    return lambda: stored

                def committed() -> list[ReportRecord]:
                    try:
                        return self._as_stored(records, wait())
                    except StoreDown as exc:
                        return self._down(records, exc)

                return committed
            try:
                stored = self._as_stored(records, self._store_records(records, rows))
            except StoreDown as exc:
                stored = self._down(records, exc)
            return lambda: stored
        stored = self._spooled(records)
        return lambda: stored

    def _as_stored(self, records: list[ReportRecord], ids: list[str]) -> list[ReportRecord]:
        """``records`` under their stored ids; when their request was stored before (a retry,
        or a request on another replica under the same id at the same time), refused unless
        it asked the same (nothing of it stored: the store kept the first)."""
        stored = _stored(records, ids)
        first = records[0] if records else None
        if stored is not records and first is not None and first.request_digest is not None:
            self.check(first.sink, first.request_id, first.request_digest)
        return stored

    def _down(self, records: list[ReportRecord], exc: StoreDown) -> list[ReportRecord]:
        log.warning("report store down, spooling: %s", exc)
        self.store_up = False
        return self._spooled(records)

    def _spooled(self, records: list[ReportRecord]) -> list[ReportRecord]:
        try:
            self.spool.append([r.to_json() for r in records])
        except (SpoolFull, SpoolWriteFailed) as exc:
            # The spool cannot take it: straight into the store if it answers (it is back
            # and the spool drains), else the decode is refused.
            try:
                ids = self.store.record(records)
            except StoreDown:
                raise exc from None
            self.store_up = True
            return self._as_stored(records, ids)
        self._wake.set()
        return records

    def _store_records(
        self, records: Sequence[ReportRecord], rows: Sequence[Any] | None
    ) -> list[str]:
        """The store's ``record`` at the time (a test may swap it), with ``rows`` when made."""
        if rows is None:
            return self.store.record(records)
        return self.store.record(records, rows)

    def _insert_batch(self, batch: list[dict[str, Any]]) -> int:
        n = self.store.insert([ReportRecord.from_json(obj) for obj in batch])
        self.store_up = True  # the store answers: new records may go straight in
        return n

    def pending_bytes(self) -> int:
        return self.spool.size()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.retry_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._migrate is not None:
                try:
                    self._migrate()
                except StoreDown:
                    continue
                log.info("report store migrated")
                self._migrate = None
            if not self.spool.size():
                self.store_up = self.store_up or self.store.ping()
            else:
                try:
                    n = self.spool.replay(self._insert_batch)
                except StoreDown:
                    self.store_up = False
                    continue
                if n:
                    log.info("spool: replayed %d report(s) into the store", n)
                if not self.spool.size():
                    self.store_up = True
            if self.store_up and self._adopt is not None and time.monotonic() >= self._adopt_at:
                self._adopt_at = time.monotonic() + self.adopt_every_s
                try:
                    self._adopt(self._insert_batch)
                except StoreDown:
                    self.store_up = False

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.spool.close()


def _reused(request_id: str) -> RequestIdReused:
    return RequestIdReused(
        f"request id {request_id!r} was sent before with another envelope: send this one under "
        "a new id"
    )


def _stored(records: list[ReportRecord], ids: list[str]) -> list[ReportRecord]:
    """``records`` under the ids the store holds for them."""
    if all(r.id == i for r, i in zip(records, ids, strict=True)):
        return records
    return [r if r.id == i else replace(r, id=i) for r, i in zip(records, ids, strict=True)]


# --- group commit: the reports of concurrent requests stored in one transaction ---------------

_commit_log = logging.getLogger("wai_dispatch.group_commit")

#: The causes of a :class:`StoreDown` that say the store itself is unreachable (not a row).
_DOWN = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout)


class _Pending:
    """One request's records (and their rows, when the request made them), waiting for the
    commit that holds them: :meth:`wait` returns once the committer has called :meth:`finish`
    (a lock held from the start and released then: one lock operation a side, where an
    ``Event`` takes a condition and a lock for each)."""

    __slots__ = ("_held", "at", "error", "finished", "ids", "records", "rows")

    def __init__(self, records: Sequence[ReportRecord], rows: Sequence[Any] | None) -> None:
        self.records = records
        self.rows = rows
        self.at = time.monotonic()
        self._held = threading.Lock()
        self._held.acquire()
        self.finished = False
        self.ids: list[str] = []
        self.error: BaseException | None = None

    def finish(self) -> None:
        """Its commit is over (``ids`` or ``error`` set): the request's thread goes on."""
        self.finished = True
        self._held.release()

    def wait(self) -> None:
        self._held.acquire()
        self._held.release()  # a second wait returns at once too


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
        inline: bool = False,
    ) -> None:
        self._commit = commit
        self.inline = inline
        self._committing = 0  # batches being stored (committer threads and inline)
        self.window_s = window_s
        self.max_records = max_records
        self._cond = threading.Condition()
        self._queue: deque[_Pending] = deque()
        self._queued = 0  # records in the queue
        self._closed = False
        self._grouping = False  # the last batch held several requests: wait the window
        self._forming = False  # a committer waits the window of the batch at the queue's head
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
        return self.enqueue(records, rows, now=True)()

    def enqueue(
        self,
        records: Sequence[ReportRecord],
        rows: Sequence[Any] | None = None,
        *,
        now: bool = False,
    ) -> Callable[[], list[str]]:
        """Put ``records`` (one request's; ``rows`` as for :meth:`submit`) in the next batch
        and return at once: the function returned waits for that batch's commit and returns
        each record's stored id, or raises what storing it raised (the caller works meanwhile:
        the decode makes its picture). ``now``: the caller waits at once (nothing to overlap
        with the commit), so with ``inline`` and no batch forming the records are committed
        here, in the caller's thread, before returning."""
        with self._cond:
            if self._closed:
                ids = self._commit(records, rows)
                return lambda: ids
            if now and self.inline and not self._queue and not self._committing:
                self._committing += 1  # no batch forming: commit here, not through a thread
                inline = True
            else:
                inline = False
            if not inline:
                pending = _Pending(records, rows)
                wake = not self._queue or self._queued + len(records) >= self.max_records
                self._queue.append(pending)
                self._queued += len(records)
                if wake and not (self.inline and self._committing):  # else: at its end
                    self._cond.notify()
        if inline:
            return self._inline(records, rows)

        def wait() -> list[str]:
            pending.wait()
            if pending.error is not None:
                raise pending.error
            return pending.ids

        return wait

    def _take(self) -> list[_Pending] | None:
        """The next batch (``None``: closed, nothing left), once its window has passed or it
        is full."""
        with self._cond:
            # inline: one batch at a time (SQLite takes one writer), the next forming meanwhile;
            # several committers: one waits the window of the batch at the queue's head
            while (
                not self._queue
                or self._forming
                or (self.inline and self._committing and not self._closed)
            ):
                if self._closed and not self._queue:
                    return None
                self._cond.wait()
            if self._grouping and self.window_s > 0:
                self._forming = True
                deadline = self._queue[0].at + self.window_s
                while self._queued < self.max_records and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                self._forming = False
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
            self._committing += 1
            if self._queue:  # more than a batch waits (or came meanwhile): the next committer
                self._cond.notify()
            return batch

    def _inline(
        self, records: Sequence[ReportRecord], rows: Sequence[Any] | None
    ) -> Callable[[], list[str]]:
        """Store one request's ``records`` alone in the caller's thread (nothing queued,
        nothing being committed: a lone writer pays no handoff to the committer); requests
        arriving meanwhile form the next batch, which the committer takes once this one is
        done. What storing raised is raised by the function returned, as from a batch."""
        try:
            ids = self._commit(records, rows)
        except BaseException as exc:
            if not isinstance(exc, StoreDown):
                _commit_log.exception("group commit: a request stored alone failed")
            error = exc

            def fail() -> list[str]:
                raise error

            return fail
        finally:
            self._done()
        with self._count:
            self.batches += 1
            self.requests += 1
        return lambda: ids

    def _done(self) -> None:
        """A batch stored: the committer may take the next (formed meanwhile)."""
        with self._cond:
            self._committing -= 1
            if self._queue:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            try:
                self._store(batch)
            except BaseException as exc:  # never leave a request waiting
                _commit_log.exception("group commit: a batch of %d request(s) failed", len(batch))
                for pending in batch:
                    if not pending.finished:
                        pending.error = exc
                        pending.finish()
            finally:
                self._done()

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
                    pending.finish()
                return
            _commit_log.warning(
                "group commit: a batch of %d requests failed (%s); storing each on its own",
                len(batch),
                exc,
            )
            for pending in batch:
                try:
                    pending.ids = self._commit(pending.records, pending.rows)
                except StoreDown as one:
                    pending.error = one
                pending.finish()
            return
        with self._count:
            self.batches += 1
            self.requests += len(batch)
        at = 0
        for pending in batch:
            pending.ids = ids[at : at + len(pending.records)]
            at += len(pending.records)
            pending.finish()

    def close(self) -> None:
        """Commit what waits, then stop the committer (later submits commit in their own
        thread)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=30)
