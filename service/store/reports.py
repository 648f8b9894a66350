"""Reading the report store: filtered, cursor-paged listing, one report, and the dashboard's
summary, every count an SQL aggregate computed in the database: from the per-hour roll-ups
(service/store/rollups.py, as :func:`~service.store.rollups.current` reads them: with the
reports not yet folded in) for the whole hours of its window, from the reports for the rest."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, Select, and_, exists, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.dispatch import strictjson
from wai_dispatch.service.store import keyset
from wai_dispatch.service.store.errors import ReportNotFound
from wai_dispatch.service.store.models import RefusalRow, ReportRow, SetRow
from wai_dispatch.service.store.records import UNITS, ReportRecord
from wai_dispatch.service.store.report_keys import by_id, by_request
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.rollups import (
    FLEET,
    HOUR_MS,
    SINK,
    Range,
    between,
    current,
    cut,
    hour_of,
    within,
)

R = ReportRow.__table__.c
F = RefusalRow.__table__.c


@dataclass(frozen=True)
class Filters:
    """What a listing or summary is restricted to; ``None`` is no restriction."""

    capability: str | None = None
    path: str | None = None  # unit/backend/arithmetic that ran, or "none"
    reason: str | None = None  # a refusal code any path of the report was refused with
    tier: str | None = None
    sink: str | None = None
    set: str | None = None
    outcome: str | None = None
    request_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    sinks: tuple[str, ...] | None = None  # a sink class's sinks (the policy in force)
    run_report: str | None = None  # the decodes of one run report (its id; with ``sink``)

    def where(self) -> list[ColumnElement[bool]]:
        out: list[ColumnElement[bool]] = []
        for column, value in (
            (R.capability, self.capability),
            (R.tier, self.tier),
            (R.sink, self.sink),
            (R.set_digest, self.set),
            (R.outcome, self.outcome),
            (R.run_report, self.run_report),
        ):
            if value is not None:
                out.append(column == value)
        if self.request_id is not None:  # by its keys (service/store/report_keys.py)
            out.append(by_request(self.request_id))
        if self.path is not None:
            out.append(R.path_ran.is_(None) if self.path == "none" else R.path_ran == self.path)
        if self.reason is not None:
            rf = RefusalRow.__table__.alias("rf")  # its own alias: the summary joins F too
            out.append(exists().where(and_(rf.c.report_seq == R.seq, rf.c.code == self.reason)))
        out += between(R.created_ms, self.since_ms, self.until_ms)
        if self.sinks is not None:
            out.append(R.sink.in_(self.sinks))
        return out


def _row(m: Any, versions: dict[str, str] | None = None) -> dict[str, Any]:
    row = dict(m)
    row["report"] = strictjson.loads(row["report"])
    out = ReportRecord.public(row)
    out["set_version"] = (versions or {}).get(out["set"] or "")
    return out


def set_versions(conn: Connection, digests: Iterable[str | None]) -> dict[str, str]:
    """The version the set registry holds for each of ``digests`` it has (one read of
    ``sets`` by its key), so a set digest is shown beside its version."""
    wanted = sorted({d for d in digests if d})
    if not wanted:
        return {}
    s = SetRow.__table__.c
    query = select(s.digest, s.version).where(s.digest.in_(wanted))
    return {str(d): str(v) for d, v in conn.execute(query)}


def list_reports(
    store: ReportStore,
    filters: Filters,
    *,
    limit: int,
    cursor: str | None,
    with_total: bool = False,
) -> dict[str, Any]:
    """Newest first (by time, then sequence: a keyset read from ``ix_reports_summary``, time
    first, or ``ix_reports_sink_created`` for one sink's, ``ix_reports_run_report`` for a run
    report's decodes, never an offset or a sort of the window's reports); ``next`` is the
    cursor of the following page, ``None`` on the last; ``total`` (when asked) counts every
    report the filters select, on every page (:func:`count`: from the roll-ups)."""
    query: Select[Any] = select(ReportRow.__table__).where(*filters.where())
    if cursor is not None:
        ms, seq = keyset.decode("t", cursor, [keyset.INT, keyset.INT])
        query = query.where(or_(R.created_ms < ms, and_(R.created_ms == ms, R.seq < seq)))
    query = query.order_by(R.created_ms.desc(), R.seq.desc()).limit(limit + 1)
    total = None
    with store.engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
        if with_total:
            total = count(conn, filters)
        versions = set_versions(conn, (r["set_digest"] for r in rows[:limit]))
    page = rows[:limit]
    more = len(rows) > limit
    out: dict[str, Any] = {
        "items": [_row(r, versions) for r in page],
        "next": keyset.encode("t", [page[-1]["created_ms"], page[-1]["seq"]])
        if more and page
        else None,
    }
    if with_total:
        out["total"] = total
    return out


def _raw_count(conn: Connection, filters: Filters, ranges: list[Range]) -> int:
    where = replace(filters, since_ms=None, until_ms=None).where() + within(R.created_ms, ranges)
    query = select(func.count()).select_from(ReportRow.__table__).where(*where)
    return int(conn.execute(query).scalar_one())


def count(conn: Connection, filters: Filters) -> int:
    """How many stored reports ``filters`` select, never a count over the window's rows: the
    whole hours from the per-hour roll-ups, the hours cut by the window's edges (the current
    one, at most two) and the oldest stored hour (retention prunes whole hours, and the roll-ups
    keep pruned hours' counts) from the reports. A filter the roll-ups cannot answer (a request
    id, a run report: both indexed) counts the reports."""
    oldest = conn.execute(select(func.min(R.created_ms))).scalar_one()
    if oldest is None:
        return 0
    nullable = (filters.path, filters.tier, filters.set)
    lo = (
        hour_of(int(oldest))
        if filters.since_ms is None
        else max(filters.since_ms, hour_of(int(oldest)))
    )
    hi = filters.until_ms
    whole: list[Range] = [(lo, hi)]
    if filters.request_id is not None or filters.run_report is not None or "" in nullable:
        return _raw_count(conn, filters, whole)
    h0 = max(-(-lo // HOUR_MS) * HOUR_MS, hour_of(int(oldest)) + HOUR_MS)
    h1 = None if hi is None else hi - hi % HOUR_MS
    if h1 is not None and h0 >= h1:
        return _raw_count(conn, filters, whole) if hi is None or lo < hi else 0
    raw: list[Range] = [(lo, h0)] if lo < h0 else []
    if hi is not None and h1 is not None and h1 < hi:
        raw.append((h1, hi))
    per_sink = filters.sink is not None or filters.sinks is not None
    c = current(conn, SINK if per_sink else FLEET).c
    where = rollup_where(c, filters, (h0, h1))
    total = 0
    if filters.reason is None:
        total = int(
            conn.execute(select(func.coalesce(func.sum(c.n), 0)).where(*where)).scalar_one()
        )
    else:
        by_codes = select(c.codes, func.sum(c.n)).where(*where).group_by(c.codes)
        for codes, n in conn.execute(by_codes).all():
            total += int(n) if filters.reason in codes.split() else 0
    return total + (_raw_count(conn, filters, raw) if raw else 0)


def get_report(store: ReportStore, report_id: str, sink: str | None) -> dict[str, Any]:
    query = select(ReportRow.__table__).where(by_id(report_id))
    if sink is not None:
        query = query.where(R.sink == sink)
    with store.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
        versions = set_versions(conn, [None if row is None else row["set_digest"]])
    if row is None:
        raise ReportNotFound(f"no report {report_id[:40]!r}")
    return _row(row, versions)


@dataclass
class _Tally:
    """What a summary adds up, from roll-up rows and from reports alike."""

    reports: int = 0
    by_path: dict[tuple[str | None, str | None], int] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)
    ops: list[int] = field(default_factory=lambda: [0] * len(UNITS))
    over_time: dict[int, dict[str, int]] = field(default_factory=dict)

    def count(self, bucket: int, outcome: str, n: int, ops: Any) -> None:
        self.reports += n
        slot = self.over_time.setdefault(bucket, {})
        slot[outcome] = slot.get(outcome, 0) + n
        for i, v in enumerate(ops):
            self.ops[i] += int(v or 0)

    def path(self, path: str | None, tier: str | None, n: int) -> None:
        self.by_path[(path, tier)] = self.by_path.get((path, tier), 0) + n

    def refused(self, code: str, n: int) -> None:
        self.refusals[code] = self.refusals.get(code, 0) + n

    def decode_share(self) -> tuple[int, dict[str, float]]:
        """Reports whose path ran (one per decode that ran), and the share of them per unit
        (the path's first part; a unit outside :data:`UNITS` counts as ``unknown``)."""
        ran = {unit: 0 for unit in UNITS}
        for (path, _), n in self.by_path.items():
            if path:
                unit = path.split("/", 1)[0]
                ran[unit if unit in ran else "unknown"] += n
        decoded = sum(ran.values())
        return decoded, {u: (n / decoded if decoded else 0.0) for u, n in ran.items()}

    def render(self, bucket_s: int) -> dict[str, Any]:
        total = sum(self.ops)
        decoded, share = self.decode_share()
        paths = sorted(
            self.by_path.items(), key=lambda kv: (-kv[1], kv[0][0] or "", kv[0][1] or "")
        )
        return {
            "reports": self.reports,
            "by_path": [{"path": p, "tier": t, "count": c} for (p, t), c in paths],
            "refusals": dict(sorted(self.refusals.items(), key=lambda kv: (-kv[1], kv[0]))),
            "placement": {
                unit: (self.ops[i] / total if total else 0.0) for i, unit in enumerate(UNITS)
            },
            "decoded": decoded,
            "decode_share": share,
            "bucket_s": bucket_s,
            "over_time": [{"start_ms": k, **v} for k, v in sorted(self.over_time.items())],
        }


def summary(
    store: ReportStore, filters: Filters, *, bucket_s: int, rollups: bool = True
) -> dict[str, Any]:
    """Counts by path and tier, refusals by code, placement share per unit, and counts per
    time bucket (``bucket_s`` seconds, aligned to the Unix epoch).

    The whole hours of the window are read from the per-hour roll-ups, the partial hours at its
    edges from the reports (:func:`split`); the answer is the one the reports alone give
    (``rollups=False``, and a test that compares them). A summary the roll-ups cannot answer
    (buckets that are no whole number of hours, a request-id filter) reads the reports only.
    On PostgreSQL its statements read one snapshot (repeatable read)."""
    bucket_ms = bucket_s * 1000
    whole = (filters.since_ms, filters.until_ms)
    raw, hours = split(filters, bucket_ms) if rollups else ([whole], None)
    tally = _Tally()
    with store.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        if hours is not None:
            _from_rollups(conn, filters, bucket_ms, hours, tally)
        if raw:
            _from_reports(conn, filters, raw, bucket_ms, tally)
    return tally.render(bucket_s)


def split(filters: Filters, bucket_ms: int) -> tuple[list[Range], Range | None]:
    """The time ranges ``[from, to)`` of a summary's window read from reports, and the whole
    hours read from roll-ups (``None`` end: unbounded; ``None`` altogether: none)."""
    whole = (filters.since_ms, filters.until_ms)
    nullable = (filters.path, filters.tier, filters.set)
    per_report = filters.request_id is not None or filters.run_report is not None
    if bucket_ms % HOUR_MS or per_report or "" in nullable:
        return [whole], None  # roll-ups keep "" for none: an empty filter value reads reports
    return cut(*whole)


def _from_rollups(
    conn: Connection,
    filters: Filters,
    bucket_ms: int,
    hours: tuple[int | None, int | None],
    tally: _Tally,
) -> None:
    """One aggregate over the roll-ups: the fleet's, or the sinks' when the summary is
    restricted to sinks (read by sink first, their primary key)."""
    per_sink = filters.sink is not None or filters.sinks is not None
    c = current(conn, SINK if per_sink else FLEET).c
    where = rollup_where(c, filters, hours)
    bucket = (c.hour_ms - c.hour_ms % bucket_ms).label("bucket")
    keys = (bucket, c.outcome, c.path, c.tier, c.codes)
    sums = [func.sum(c.n), *(func.sum(c[f"placement_{u}"]) for u in UNITS)]
    rows = conn.execute(select(*keys, *sums).where(*where).group_by(*keys)).all()
    for b, outcome, p, tier, codes, n, *ops in rows:
        refusals = codes.split()
        if filters.reason is not None and filters.reason not in refusals:
            continue
        n = int(n)
        tally.count(int(b), outcome, n, ops)
        tally.path(p or None, tier or None, n)
        for code in refusals:
            tally.refused(code, n)


def rollup_where(
    c: Any, filters: Filters, hours: tuple[int | None, int | None]
) -> list[ColumnElement[bool]]:
    """The conditions selecting ``filters``' roll-up rows (columns ``c``: the fleet's or the
    sinks', which alone has ``sink``) of the whole ``hours``."""
    where = between(c.hour_ms, *hours)
    path = "" if filters.path == "none" else filters.path
    for column, value in (
        (c.capability, filters.capability),
        (c.tier, filters.tier),
        (c.set_digest, filters.set),
        (c.outcome, filters.outcome),
        (c.path, path),
    ):
        if value is not None:
            where.append(column == value)
    if filters.sink is not None:
        where.append(c.sink == filters.sink)
    if filters.sinks is not None:
        where.append(c.sink.in_(filters.sinks))
    return where


def _from_reports(
    conn: Connection, filters: Filters, ranges: list[Range], bucket_ms: int, tally: _Tally
) -> None:
    """Two statements over the reports of ``ranges`` (the window's edges, or all of it): the
    counts and placement sums by time bucket, outcome, path and tier, an aggregate read from
    ``ix_reports_summary`` (time first, then every column the summary filters or sums, so no
    table row is read; tests/service/store/test_report_indexes.py shows the plan), and
    the refusals of the reports selected (``IN`` a sub-select), found by their primary key."""
    where = replace(filters, since_ms=None, until_ms=None).where() + within(R.created_ms, ranges)
    bucket = (R.created_ms - R.created_ms % bucket_ms).label("bucket")
    n = func.count().label("n")
    sums = [func.sum(R[f"placement_{u}"]).label(u) for u in UNITS]
    keys = (bucket, R.outcome, R.path_ran, R.tier)
    groups = conn.execute(select(*keys, n, *sums).where(*where).group_by(*keys)).all()
    selected = select(R.seq).where(*where)
    refusals = conn.execute(
        select(F.code, n).where(F.report_seq.in_(selected)).group_by(F.code)
    ).all()
    for g in groups:
        tally.count(int(g.bucket), g.outcome, int(g.n), [getattr(g, u) for u in UNITS])
        tally.path(g.path_ran, g.tier, int(g.n))
    for code, c in refusals:
        tally.refused(code, int(c))
