"""The recorder: where every decode's records go. Straight into the report store while it
answers and nothing is spooled (through group commit, service/store/group_commit.py, or one
transaction per decode), else into the durable spool (service/store/spool.py), which the
recorder's thread replays when the store is back, migrating it first when the service started
while it was down, and adopting the orphaned spools of dead replicas on the spool volume."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from wai_dispatch.service.store.errors import RequestIdReused, RequestInFlight
from wai_dispatch.service.store.group_commit import GroupCommit
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.spool import Spool, SpoolFull, SpoolWriteFailed

__all__ = ["Recorder"]

log = logging.getLogger("wai_dispatch.spool")


class Recorder:
    """Stores each decode's records: straight into the store while it answers and nothing is
    spooled, else into the spool, which a thread replays when the store is back. When the
    spool cannot take a line (full, or its disk is) the store is tried once more, so a decode
    is never refused once the store is back, even while the spool still drains.

    Straight into the store is, with ``commit_window_s`` given, through group commit
    (service/store/group_commit.py: concurrent decodes' records in one transaction, each
    decode returning once it has committed; ``commit_max`` records a batch at most; two
    committers on PostgreSQL, one on SQLite, unless ``committers`` says), else one
    transaction per decode. The rows the
    store's statement takes are made in the decode's own thread, not the committer's.
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
                committers=committers or (2 if store.dialect == "postgresql" else 1),
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
        return self.begin(records)()

    def begin(self, records: list[ReportRecord]) -> Callable[[], list[ReportRecord]]:
        """:meth:`record` in two halves: ``records`` handed over now, and a function that
        returns them as stored once they are durable (or raises the typed error). Through
        group commit the handing over does not wait for the commit, so the caller works
        while the batch commits and waits only for what is left of it; otherwise the records
        are stored (or spooled) here and the function returns them at once."""
        if self.store_up and not self.spool.size():
            rows = self.store.rows(records)  # here, in the request's thread
            if self.group is not None:
                try:
                    wait = self.group.enqueue(records, rows)
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
