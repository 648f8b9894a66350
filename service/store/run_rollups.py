"""Run reports counted per hour, sink, class and verdict (``run_report_rollups``): what the
dashboard's run-report counts read (the compliance summary's per class, service/store/
policies.py; the fleet sinks table's per sink, service/store/fleet.py), so they cost the hours
of the window, not its run reports.

:func:`add` is called in the transaction that stores a run report, only when its row went in
(a resubmission, skipped by ``uq_run_reports_sink``, counts nothing), so the counts are exactly
the rows. :func:`counts` reads whole hours from the roll-ups and the window's partial hours at
its edges from ``run_reports`` (received time, indexed): exact for any window.
:func:`rebuild` computes them from the stored run reports (the migration that adds them)."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import Connection, Table, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.service.store.models import RunReportRollupRow, RunReportRow

__all__ = ["ROLLUPS", "add", "counts", "rebuild"]

HOUR_MS = 3_600_000
ROLLUPS: Table = RunReportRollupRow.__table__  # type: ignore[assignment]
RR = RunReportRow.__table__.c
U = ROLLUPS.c


def add(conn: Connection, *, sink: str, sink_class: str | None, accepted: bool,
        received_ms: int) -> None:  # fmt: skip
    """Count one run report just inserted, in the caller's transaction."""
    ins = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(ROLLUPS)
    latest = (func.greatest if conn.dialect.name == "postgresql" else func.max)(
        U.last_ms, ins.excluded.last_ms
    )
    conn.execute(
        ins.values(hour_ms=received_ms - received_ms % HOUR_MS, sink=sink,
                   sink_class=sink_class or "", accepted=accepted, n=1, last_ms=received_ms)
        .on_conflict_do_update(index_elements=["hour_ms", "sink", "sink_class", "accepted"],
                               set_={"n": U.n + ins.excluded.n, "last_ms": latest})
    )  # fmt: skip


def _between(col: Any, lo: int | None, hi: int | None) -> list[ColumnElement[bool]]:
    return [*([] if lo is None else [col >= lo]), *([] if hi is None else [col < hi])]


def counts(
    conn: Connection,
    by: Literal["class", "sink"],
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    sink_class: str | None = None,
    sink: str | None = None,
) -> dict[tuple[str | None, bool], tuple[int, int]]:
    """Per ``by`` (the class, ``None``: none; or the sink) and verdict (accepted or not): the
    run reports received in ``[since_ms, until_ms)`` and the latest's time. ``sink_class`` and
    ``sink``: only those."""
    h0 = None if since_ms is None else -(-since_ms // HOUR_MS) * HOUR_MS
    h1 = None if until_ms is None else until_ms - until_ms % HOUR_MS
    raw: list[tuple[int | None, int | None]] = []
    hours: tuple[int | None, int | None] | None = (h0, h1)
    if h0 is not None and h1 is not None and h0 >= h1:
        raw, hours = [(since_ms, until_ms)], None
    else:
        if since_ms is not None and h0 is not None and since_ms < h0:
            raw.append((since_ms, h0))
        if until_ms is not None and h1 is not None and h1 < until_ms:
            raw.append((h1, until_ms))
    out: dict[tuple[str | None, bool], tuple[int, int]] = {}

    def take(rows: Any) -> None:
        for key, accepted, n, last in rows:
            k = (key or None) if by == "class" else key
            had = out.get((k, bool(accepted)), (0, 0))
            out[(k, bool(accepted))] = (had[0] + int(n), max(had[1], int(last)))

    if hours is not None:
        where = _between(U.hour_ms, *hours)
        if sink_class:
            where.append(U.sink_class == sink_class)
        if sink:
            where.append(U.sink == sink)
        col = U.sink_class if by == "class" else U.sink
        take(conn.execute(
            select(col, U.accepted, func.sum(U.n), func.max(U.last_ms))
            .where(*where).group_by(col, U.accepted)
        ).all())  # fmt: skip
    for lo, hi in raw:
        where = _between(RR.received_ms, lo, hi)
        if sink_class:
            where.append(RR.sink_class == sink_class)
        if sink:
            where.append(RR.sink == sink)
        of = RR.sink_class if by == "class" else RR.sink
        take(conn.execute(
            select(of, RR.accepted, func.count(), func.max(RR.received_ms))
            .where(*where).group_by(of, RR.accepted)
        ).all())  # fmt: skip
    return out


def rebuild(conn: Connection) -> None:
    """Recompute the roll-ups from the stored run reports, in the caller's transaction."""
    hour = (RR.received_ms - RR.received_ms % HOUR_MS).label("hour_ms")
    cls = func.coalesce(RR.sink_class, "").label("sink_class")
    conn.execute(delete(ROLLUPS))
    conn.execute(insert(ROLLUPS).from_select(
        ["hour_ms", "sink", "sink_class", "accepted", "n", "last_ms"],
        select(hour, RR.sink, cls, RR.accepted, func.count(), func.max(RR.received_ms))
        .group_by(hour, RR.sink, cls, RR.accepted),
    ))  # fmt: skip
