"""The aggregator: a thread in each service process that folds the report inbox into the
roll-ups (service/store/rollups.py :func:`~service.store.rollups.fold`): every ``interval_s``,
or at once when :meth:`Aggregator.wake` is called, it folds batches until the inbox is empty,
each batch one transaction (the inbox rows deleted and their reports counted, both or
neither). Several processes, on one machine or many, each run one: on PostgreSQL their folds
take disjoint batches (``FOR UPDATE SKIP LOCKED``), on SQLite one at a time (its one writer).

What it folds is never lost nor counted twice: a fold that fails (the store down, a deadlock
the server broke, the process killed) rolls back, and the next one takes the same reports. Its
lag is visible: :meth:`Aggregator.lag` gives the inbox's depth and the age of its oldest row
(``/metrics``: ``wai_rollup_inbox_reports``, ``wai_rollup_inbox_oldest_seconds``).
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy.exc import SQLAlchemyError

from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.report_store import ReportStore

__all__ = ["Aggregator"]

log = logging.getLogger("wai_dispatch.aggregator")


class Aggregator:
    """Folds the inbox of ``store`` into its roll-ups every ``interval_s`` (``batch`` reports a
    transaction at most; ``None``: the dialect's :data:`~service.store.rollups.FOLD_BATCH`), in
    a daemon thread started here (``start``); :meth:`close` stops it."""

    def __init__(
        self,
        store: ReportStore,
        *,
        interval_s: float = 0.5,
        batch: int | None = None,
        start: bool = True,
    ) -> None:
        self.store = store
        self.interval_s = interval_s
        self.batch = batch or rollups.FOLD_BATCH.get(store.dialect, 1000)
        #: Reports folded and folds committed by this process (the bench, tests).
        self.folded = 0
        self.folds = 0
        self._oldest: tuple[int, float] | None = None  # (seq, when this process first saw it)
        self._last = (0, 0.0)
        self._failing = False  # the last fold failed (its warning logged once)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rollup-fold", daemon=True)
        if start:
            self._thread.start()

    def fold_once(self) -> int:
        """One fold of at most ``batch`` reports, in its own transaction; returns how many.
        Raises what the database raised (rolled back: nothing folded)."""
        with self.store.engine.connect() as conn:
            rollups.begin_fold(conn)
            n = rollups.fold(conn, self.batch)
            conn.commit()
        if n:
            with self._lock:
                self.folded += n
                self.folds += 1
        return n

    def drain(self) -> int:
        """Fold until the inbox is empty (what another process holds locked aside: a fold of
        less than a whole batch ends it); returns how many reports this call folded."""
        total = 0
        while True:
            n = self.fold_once()
            total += n
            if n < self.batch:
                return total

    def lag(self) -> tuple[int, float]:
        """The reports in the inbox and the age in seconds of the oldest (0: none), read now:
        the age from when this process first saw that row the oldest (its fold, or an earlier
        :meth:`lag`), so it is late by at most one ``interval_s``. A store that does not answer
        gives the last reading (never raises: ``/metrics`` samples it)."""
        try:
            with self.store.engine.connect() as conn:
                depth, oldest = rollups.inbox(conn)
        except SQLAlchemyError:
            return self._last
        self._last = (depth, self._age(oldest))
        return self._last

    def _age(self, oldest: int | None) -> float:
        now = time.monotonic()
        with self._lock:
            if oldest is None:
                self._oldest = None
                return 0.0
            if self._oldest is None or self._oldest[0] != oldest:
                self._oldest = (oldest, now)
            return now - self._oldest[1]

    def wake(self) -> None:
        """Fold now, not at the next interval."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                # the oldest row's age counted from here at the latest; an empty inbox is
                # not folded (on SQLite a fold takes the writer lock, even for nothing)
                if self.lag()[0]:
                    self.drain()
                self._failing = False
            except SQLAlchemyError as exc:  # the store down, a deadlock broken: tried again
                (log.debug if self._failing else log.warning)(
                    "roll-up fold failed, tried again every %.1f s: %s",
                    self.interval_s,
                    str(exc).splitlines()[0],
                )
                self._failing = True
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def close(self) -> None:
        """Stop folding (what is left waits in the inbox for the next fold, here or
        elsewhere)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
