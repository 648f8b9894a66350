"""Per-hour roll-ups of the reports: what the dashboard's summary counts (reports by path and
tier, by outcome over time, refusals by code, placement sums), kept per hour, per capability,
set, path, tier, outcome and refusal codes, once for the whole fleet (``report_rollups``, a few
rows an hour) and once per sink (``report_rollups_sink``).

Written in the transaction that inserts the reports, for the reports that insert actually
inserted (:func:`add`, called by :func:`service.store.report_store.insert_records`): a spool
replay or a resubmitted run report, skipped as already stored, never counts twice, and a
transaction that rolls back takes its counts with it. Pruning reports
(service/store/retention.py) leaves the roll-ups as they are. :func:`rebuild` computes them from
the stored reports (the migration that adds them, and bulk loads that bypass :func:`add`).

A report's refusal codes are one key part, sorted and joined with a space (the dispatch's
codes have none), so a summary filtered by a refusal code, and the count of refusals by
code, are read from the same rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, Table, delete, func, insert, literal, select
from sqlalchemy.dialects import postgresql, sqlite

from wai_dispatch.service.store import activity
from wai_dispatch.service.store.models import RefusalRow, ReportRow, RollupRow, SinkRollupRow
from wai_dispatch.service.store.records import UNITS, ReportRecord

__all__ = ["HOUR_MS", "SUMS", "Key", "add", "add_counts", "codes_of", "hour_of", "rebuild"]

HOUR_MS = 3_600_000
FLEET: Table = RollupRow.__table__  # type: ignore[assignment]
SINK: Table = SinkRollupRow.__table__  # type: ignore[assignment]
SUMS = ("n", *(f"placement_{u}" for u in UNITS))
#: The key parts shared by both tables, in their primary keys' order.
KEY = ("hour_ms", "capability", "set_digest", "path", "tier", "outcome", "codes")


def hour_of(ms: int) -> int:
    """The first millisecond of the hour ``ms`` lies in (aligned to the Unix epoch)."""
    return ms - ms % HOUR_MS


def codes_of(codes: Iterable[str]) -> str:
    """The refusal-codes key part of a report refused with ``codes`` (any order, repeats kept)."""
    return " ".join(sorted(codes))


class Key(NamedTuple):
    """A report's key in the roll-ups (a tuple: sorted and hashed as one)."""

    sink: str
    hour_ms: int
    capability: str
    set_digest: str
    path: str
    tier: str
    outcome: str
    codes: str

    @classmethod
    def of(cls, rec: ReportRecord) -> Key:
        return cls(
            rec.sink,
            hour_of(rec.created_ms),
            rec.capability,
            rec.set_digest or "",
            rec.path_ran or "",
            rec.tier or "",
            rec.outcome,
            codes_of(r.code for r in rec.refusals),
        )

    def row(self, *, sink: bool) -> dict[str, Any]:
        out = dict(zip(KEY, self[1:], strict=True))
        if sink:
            out["sink"] = self.sink
        return out


def _sums(rec: ReportRecord) -> list[int]:
    return [1, *(int(rec.placement.get(u, 0)) for u in UNITS)]


def add(conn: Connection, records: Iterable[ReportRecord]) -> None:
    """Count ``records`` (reports this transaction has just inserted) into both roll-ups, and
    into the fleet tables' per-sink activity (service/store/activity.py)."""
    records = list(records)
    activity.add(conn, records)
    deltas: dict[Key, list[int]] = {}
    for rec in records:
        into = deltas.setdefault(Key.of(rec), [0] * len(SUMS))
        for i, v in enumerate(_sums(rec)):
            into[i] += v
    add_counts(conn, deltas)


def add_counts(conn: Connection, deltas: Mapping[Key, Sequence[int]]) -> None:
    """Add ``deltas`` (per key: the report count and the placement sums, :data:`SUMS`) to both
    roll-ups: one upsert statement per table, its rows in key order (two transactions on
    PostgreSQL lock the rows they share in the same order, so they wait, never deadlock)."""
    if not deltas:
        return
    fleet: dict[tuple[Any, ...], list[int]] = {}
    for key, sums in deltas.items():
        into = fleet.setdefault(key[1:], [0] * len(SUMS))
        for i, v in enumerate(sums):
            into[i] += v
    _upsert(conn, FLEET, [
        {**dict(zip(KEY, parts, strict=True)), **dict(zip(SUMS, sums, strict=True))}
        for parts, sums in sorted(fleet.items())
    ])  # fmt: skip
    _upsert(conn, SINK, [
        {**key.row(sink=True), **dict(zip(SUMS, sums, strict=True))}
        for key, sums in sorted(deltas.items())
    ])  # fmt: skip


def _upsert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    ins = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)
    stmt = ins.on_conflict_do_update(
        index_elements=[c.name for c in table.primary_key.columns],
        set_={s: table.c[s] + ins.excluded[s] for s in SUMS},
    )
    conn.execute(stmt, rows)


def rebuild(conn: Connection) -> int:
    """Recompute both roll-ups from the stored reports, in the caller's transaction (whatever
    they held is replaced); returns the fleet table's rows. Two aggregate statements: each
    report's codes (sorted: PostgreSQL's ``string_agg … ORDER BY``; SQLite's ``group_concat``
    over rows already in code order, the order it concatenates in), then the sums by key."""
    r = ReportRow.__table__.c
    f = RefusalRow.__table__.c
    if conn.dialect.name == "postgresql":
        per_report = (
            select(f.report_seq,
                   func.string_agg(f.code, postgresql.aggregate_order_by(literal(" "), f.code))
                   .label("codes"))
            .group_by(f.report_seq).subquery()
        )  # fmt: skip
    else:
        ordered = select(f.report_seq, f.code).order_by(f.report_seq, f.code).subquery()
        per_report = (
            select(ordered.c.report_seq,
                   func.group_concat(ordered.c.code, literal(" ")).label("codes"))
            .group_by(ordered.c.report_seq).subquery()
        )  # fmt: skip
    hour = (r.created_ms - r.created_ms % HOUR_MS).label("hour_ms")
    parts = {
        "hour_ms": hour,
        "capability": r.capability,
        "set_digest": func.coalesce(r.set_digest, "").label("set_digest"),
        "path": func.coalesce(r.path_ran, "").label("path"),
        "tier": func.coalesce(r.tier, "").label("tier"),
        "outcome": r.outcome,
        "codes": func.coalesce(per_report.c.codes, "").label("codes"),
    }
    sums = [func.count().label("n"), *(func.sum(r[f"placement_{u}"]).label(f"placement_{u}")
                                       for u in UNITS)]  # fmt: skip
    source = ReportRow.__table__.outerjoin(per_report, per_report.c.report_seq == r.seq)
    conn.execute(delete(FLEET))
    conn.execute(delete(SINK))
    by_sink = select(r.sink, *parts.values(), *sums).select_from(source)
    by_sink = by_sink.group_by(r.sink, *parts.values())
    conn.execute(insert(SINK).from_select(["sink", *KEY, *SUMS], by_sink))
    s = SINK.c
    fleet = select(*(s[k] for k in KEY), *(func.sum(s[k]).label(k) for k in SUMS))
    conn.execute(insert(FLEET).from_select([*KEY, *SUMS], fleet.group_by(*(s[k] for k in KEY))))
    return int(conn.execute(select(func.count()).select_from(FLEET)).scalar_one())
