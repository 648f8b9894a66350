"""Retention: reports older than ``WAI_REPORT_RETENTION_DAYS`` (default 30; 0 keeps them) are
deleted, with the request errors noted before the same cut-off, and per-hour roll-ups older
than ``WAI_ROLLUP_RETENTION_DAYS`` (default 0: kept forever), by :func:`prune`, which both the
service's :class:`Pruner` thread (every ``WAI_PRUNE_INTERVAL_S``) and
``wai-dispatch reports prune`` run.

Reports go in batches, each its own short transaction (at most ``batch`` reports and their
refusals, found by ``ix_reports_summary``, time first), so a decode's insert waits for at most
one batch (SQLite has one writer; on PostgreSQL the rows are disjoint, and a batch another
replica is deleting is skipped: ``FOR UPDATE SKIP LOCKED``). The reports' cut-off is the start
of a UTC day on every store (:func:`report_cutoff`), so the reports kept are whole days, the
same on SQLite and PostgreSQL, and the roll-ups, which pruning never touches, still count every
report.

On PostgreSQL, ``reports`` is partitioned by UTC day (service/store/partitions.py): each
partition whose day ends by the cut-off is dropped whole, with its refusals and keys, and only
the reports left before the cut-off, those of the default partition (a day without a partition
of its own), go in batches as above. :func:`prune_reports` with any cut-off answers as on
SQLite: whole partitions before it dropped, the rest before it deleted in batches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import case, delete, select, update

from wai_dispatch.service.store import partitions
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.models import RefusalRow, ReportRow
from wai_dispatch.service.store.report_keys import KEYS
from wai_dispatch.service.store.report_store import ReportStore, StoreDown, as_store_down
from wai_dispatch.service.store.request_error_views import prune_errors
from wai_dispatch.service.store.rollups import (
    DAY_MS,
    DAYS,
    EXACT_DAYS,
    EXACT_GROUPS,
    FLEET,
    GROUP_DAYS,
    HORIZON,
    HOUR_MS,
    HOURS,
    INBOX,
    SINK,
    SINK_DAYS,
    SINK_HOURS,
    hour_of,
)

__all__ = ["BATCH", "Pruned", "Pruner", "cutoff", "prune", "prune_reports", "prune_rollups"]

log = logging.getLogger("wai_dispatch.service.retention")

#: Reports deleted per transaction.
BATCH = 2000
R = ReportRow.__table__.c
F = RefusalRow.__table__.c


@dataclass(frozen=True)
class Pruned:
    reports: int
    rollup_hours: int
    reports_before_ms: int | None  # the cut-off; None: reports are kept forever
    rollups_before_ms: int | None
    request_errors: int = 0  # service/store/request_errors.py, pruned with the reports


def cutoff(days: int, now_ms: int) -> int | None:
    """The first millisecond kept when ``days`` are kept at ``now_ms`` (an hour's start);
    ``None`` when ``days`` is 0 (kept forever)."""
    return None if days <= 0 else hour_of(now_ms - days * DAY_MS)


def report_cutoff(days: int, now_ms: int) -> int | None:
    """The first millisecond of the reports kept when ``days`` are kept at ``now_ms``: the start
    of the UTC day :func:`cutoff` falls in (whole days, a partition each on PostgreSQL);
    ``None`` when ``days`` is 0."""
    hour = cutoff(days, now_ms)
    return None if hour is None else hour - hour % DAY_MS


def prune_reports(
    store: ReportStore,
    before_ms: int,
    *,
    batch: int = BATCH,
    pause_s: float = 0.0,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Delete the reports created before ``before_ms`` (and their refusals), ``batch`` a
    transaction, ``pause_s`` between transactions; returns how many went. On PostgreSQL the
    partitions whose day ends by ``before_ms`` are dropped whole first
    (:func:`service.store.partitions.drop_before`), and the reports of one it had to leave
    for the next pass, and after it, wait for that pass."""
    total = 0
    if store.dialect == "postgresql":
        with as_store_down():
            total, left = partitions.drop_before(store.engine, before_ms)
        # a partition left for the next pass is not deleted row by row meanwhile
        before_ms = min(before_ms, left)
    # a report still in the inbox stays until the aggregator has counted it (a sink's report
    # may arrive older than the cut-off)
    kept = R.seq.not_in(select(INBOX.c.seq))
    pick = select(R.seq).where(R.created_ms < before_ms, kept).order_by(R.created_ms).limit(batch)
    if store.dialect == "postgresql":
        pick = pick.with_for_update(skip_locked=True)
    while not stop():
        with as_store_down(), store.engine.begin() as conn:
            seqs = list(conn.execute(pick).scalars())
            if seqs:
                conn.execute(delete(RefusalRow).where(F.report_seq.in_(seqs)))
                # the time too: PostgreSQL reads only the partitions before the cut-off
                gone = delete(ReportRow).where(R.seq.in_(seqs), R.created_ms < before_ms)
                if store.dialect == "postgresql":  # and their keys (report_keys, 0017)
                    ids = list(conn.execute(gone.returning(R.id)).scalars())
                    conn.execute(delete(KEYS).where(KEYS.c.id.in_(ids)))
                else:
                    conn.execute(gone)
        total += len(seqs)
        if len(seqs) < batch:
            break
        if pause_s:
            time.sleep(pause_s)
    return total


def prune_rollups(store: ReportStore, before_ms: int, *, hours: int = 24) -> int:
    """Delete the roll-ups of the hours before ``before_ms``, ``hours`` hours a transaction;
    returns how many hours went. Each transaction first moves the roll-ups' horizon up to the
    hours it deletes (``rollup_horizon``, rollups.horizon_of): it waits for a fold under way
    (PostgreSQL: the horizon's row, which a fold reads ``FOR SHARE``; SQLite: the one writer),
    and no fold after it counts a report of those hours, so a report that arrives late for a
    pruned hour (a sink's run report, a spool replayed) brings no row of it back."""
    total = 0
    while True:
        with as_store_down(), store.engine.begin() as conn:
            first = select(FLEET.c.hour_ms).where(FLEET.c.hour_ms < before_ms).distinct()
            found = list(conn.execute(first.order_by(FLEET.c.hour_ms).limit(hours)).scalars())
            upto = found[-1] + HOUR_MS if len(found) == hours else before_ms
            moved = update(HORIZON).where(HORIZON.c.id == 1)
            later = case((HORIZON.c.before_ms < upto, upto), else_=HORIZON.c.before_ms)
            conn.execute(moved.values(before_ms=later))
            conn.execute(delete(FLEET).where(FLEET.c.hour_ms < upto))
            conn.execute(delete(SINK).where(SINK.c.hour_ms < upto))
            conn.execute(delete(HOURS).where(HOURS.c.start_ms < upto))
            conn.execute(delete(DAYS).where(DAYS.c.start_ms + DAY_MS <= upto))
            conn.execute(delete(SINK_HOURS).where(SINK_HOURS.c.start_ms < upto))
            conn.execute(delete(SINK_DAYS).where(SINK_DAYS.c.start_ms + DAY_MS <= upto))
            conn.execute(delete(EXACT_DAYS).where(EXACT_DAYS.c.start_ms + DAY_MS <= upto))
            # a group goes with its last day: one with a day still kept keeps its row
            kept_from = upto - upto % DAY_MS
            conn.execute(delete(EXACT_GROUPS).where(EXACT_GROUPS.c.last_ms < kept_from))
            conn.execute(delete(GROUP_DAYS).where(GROUP_DAYS.c.start_ms < kept_from))
        total += len(found)
        if upto >= before_ms:
            return total


def prune(
    store: ReportStore,
    *,
    report_days: int,
    rollup_days: int,
    now_ms: int | None = None,
    batch: int = BATCH,
    pause_s: float = 0.0,
    stop: Callable[[], bool] = lambda: False,
) -> Pruned:
    """One pass of retention at ``now_ms`` (default now)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    reports_before = report_cutoff(report_days, now)
    rollups_before = cutoff(rollup_days, now)
    n = errors = 0
    if reports_before is not None:
        with as_store_down():  # what the inbox holds counted first: those reports may go too
            Aggregator(store, start=False).drain()
        n = prune_reports(store, reports_before, batch=batch, pause_s=pause_s, stop=stop)
        with as_store_down():
            errors = prune_errors(store, reports_before)
    hours = 0 if rollups_before is None else prune_rollups(store, rollups_before)
    return Pruned(n, hours, reports_before, rollups_before, errors)


class Pruner:
    """The service's retention thread: :func:`prune` every ``interval_s`` (the first pass
    ``first_after_s`` after start, or ``interval_s`` when that is sooner), a short pause
    between batches so decodes' inserts interleave; a store that is down is tried again at
    the next pass."""

    def __init__(
        self,
        store: ReportStore,
        *,
        report_days: int,
        rollup_days: int,
        interval_s: float,
        first_after_s: float = 60.0,
        pause_s: float = 0.02,
    ) -> None:
        self.store = store
        self.report_days = report_days
        self.rollup_days = rollup_days
        self.interval_s = interval_s
        self.pause_s = pause_s
        self.passes = 0
        self.last: Pruned | None = None
        self._first = first_after_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="report-pruner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wait = min(self._first, self.interval_s)
        while not self._stop.wait(wait):
            wait = self.interval_s
            try:
                self.last = prune(
                    self.store,
                    report_days=self.report_days,
                    rollup_days=self.rollup_days,
                    pause_s=self.pause_s,
                    stop=self._stop.is_set,
                )
            except StoreDown as exc:
                log.warning("pruning reports: the store is down, next try in %.0f s: %s", wait, exc)
                continue
            self.passes += 1
            if self.last.reports or self.last.rollup_hours:
                log.info(
                    "pruned %d report(s) and %d hour(s) of roll-ups",
                    self.last.reports,
                    self.last.rollup_hours,
                )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
