"""Per-sink activity roll-ups for the fleet tables (service/store/fleet.py): per hour
(``sink_set_hours``) and per UTC day (``sink_set_days``), per sink and set, the reports, those
where no path ran, and the latest report's time. A few numbers a sink and set, so the fleet
tables of a month read about thirty rows per sink and set, whatever the number of reports, and
the last-seen time is exact without reading a report. And per sink and set
(``sink_sets``), the latest report's time: the sets table counts a set's sinks of a window
that reaches now from one row a pair (service/store/fleet_sets.py).

Written with the per-hour roll-ups, in the transaction that inserts the reports
(:func:`service.store.rollups.add` calls :func:`add`), so they count exactly what was inserted;
:func:`rebuild` computes them from the stored reports (the migration that adds them). Pruning
the roll-ups prunes these with them (service/store/retention.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, case, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from wai_dispatch.service.store.models import ReportRow, SinkSetDayRow, SinkSetHourRow, SinkSetRow
from wai_dispatch.service.store.records import ReportRecord

__all__ = [
    "DAYS",
    "DAY_MS",
    "HOURS",
    "PAIRS",
    "add",
    "add_counts",
    "day_of",
    "rebuild",
    "rebuild_pairs",
]

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
HOURS: Table = SinkSetHourRow.__table__  # type: ignore[assignment]
DAYS: Table = SinkSetDayRow.__table__  # type: ignore[assignment]
PAIRS: Table = SinkSetRow.__table__  # type: ignore[assignment]
#: (sink, set digest or "", hour's first ms) -> [reports, no-path reports, latest ms]
Deltas = Mapping[tuple[str, str, int], Sequence[int]]


def day_of(ms: int) -> int:
    """The first millisecond of the UTC day ``ms`` lies in."""
    return ms - ms % DAY_MS


def tally(records: Iterable[ReportRecord]) -> dict[tuple[str, str, int], list[int]]:
    out: dict[tuple[str, str, int], list[int]] = {}
    for rec in records:
        key = (rec.sink, rec.set_digest or "", rec.created_ms - rec.created_ms % HOUR_MS)
        slot = out.setdefault(key, [0, 0, rec.created_ms])
        slot[0] += 1
        slot[1] += rec.outcome == "refused"
        slot[2] = max(slot[2], rec.created_ms)
    return out


def add(conn: Connection, records: Iterable[ReportRecord]) -> None:
    """Count ``records`` (reports this transaction has just inserted)."""
    add_counts(conn, tally(records))


def add_counts(conn: Connection, deltas: Deltas) -> None:
    """Add ``deltas`` to the hours and the days, and move their pairs' latest times: one
    upsert a table, rows in key order."""
    if not deltas:
        return
    days: dict[tuple[int, str, str], list[int]] = {}
    for (sink, digest, hour), (n, no_path, last) in deltas.items():
        slot = days.setdefault((day_of(hour), sink, digest), [0, 0, last])
        slot[0] += n
        slot[1] += no_path
        slot[2] = max(slot[2], last)
    hours = {(hour, sink, digest): list(v) for (sink, digest, hour), v in deltas.items()}
    for table, rows in ((HOURS, hours), (DAYS, days)):
        _upsert(conn, table, [
            {"start_ms": k[0], "sink": k[1], "set_digest": k[2], "n": v[0], "no_path": v[1],
             "last_ms": v[2]}
            for k, v in sorted(rows.items())
        ])  # fmt: skip
    pairs: dict[tuple[str, str], int] = {}
    for (sink, digest, _), (_, _, last) in deltas.items():
        pairs[(sink, digest)] = max(last, pairs.get((sink, digest), last))
    pg = conn.dialect.name == "postgresql"
    ins = (postgresql.insert if pg else sqlite.insert)(PAIRS)
    latest = (func.greatest if pg else func.max)(PAIRS.c.last_ms, ins.excluded.last_ms)
    conn.execute(
        ins.on_conflict_do_update(index_elements=["sink", "set_digest"], set_={"last_ms": latest}),
        [{"sink": k[0], "set_digest": k[1], "last_ms": v} for k, v in sorted(pairs.items())],
    )


def _upsert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    pg = conn.dialect.name == "postgresql"
    ins = (postgresql.insert if pg else sqlite.insert)(table)
    latest = (func.greatest if pg else func.max)(table.c.last_ms, ins.excluded.last_ms)
    conn.execute(
        ins.on_conflict_do_update(
            index_elements=["start_ms", "sink", "set_digest"],
            set_={"n": table.c.n + ins.excluded.n,
                  "no_path": table.c.no_path + ins.excluded.no_path, "last_ms": latest},
        ),
        rows,
    )  # fmt: skip


def rebuild(conn: Connection) -> None:
    """Recompute the hours and the days from the stored reports, in the caller's
    transaction."""
    r = ReportRow.__table__.c
    hour = (r.created_ms - r.created_ms % HOUR_MS).label("start_ms")
    digest = func.coalesce(r.set_digest, "").label("set_digest")
    refused = func.sum(case((r.outcome == "refused", 1), else_=0)).label("no_path")
    cols = ["start_ms", "sink", "set_digest", "n", "no_path", "last_ms"]
    conn.execute(delete(HOURS))
    conn.execute(delete(DAYS))
    by_hour = (
        select(hour, r.sink, digest, func.count().label("n"), refused,
               func.max(r.created_ms).label("last_ms"))
        .group_by(hour, r.sink, digest)
    )  # fmt: skip
    conn.execute(insert(HOURS).from_select(cols, by_hour))
    h = HOURS.c
    day = (h.start_ms - h.start_ms % DAY_MS).label("start_ms")
    by_day = select(day, h.sink, h.set_digest, func.sum(h.n), func.sum(h.no_path),
                    func.max(h.last_ms)).group_by(day, h.sink, h.set_digest)  # fmt: skip
    conn.execute(insert(DAYS).from_select(cols, by_day))


def rebuild_pairs(conn: Connection) -> None:
    """Recompute ``sink_sets`` from the days (after :func:`rebuild`; migration 0009 fills it
    itself: 0008's call of :func:`rebuild` runs before the table exists)."""
    d = DAYS.c
    conn.execute(delete(PAIRS))
    conn.execute(insert(PAIRS).from_select(
        ["sink", "set_digest", "last_ms"],
        select(d.sink, d.set_digest, func.max(d.last_ms)).group_by(d.sink, d.set_digest),
    ))  # fmt: skip
