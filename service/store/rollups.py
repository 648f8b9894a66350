"""The roll-ups: counts of the stored reports, folded in by the aggregator a moment after they are
stored, read for the whole hours (or days) of a window, the partial hours at its edges read from
the rows themselves (:func:`cut`).

- ``report_rollups`` (the whole fleet, a few rows an hour) and ``report_rollups_sink`` (per
  sink): reports per hour, capability, set, path, tier, outcome and refusal codes, with their
  placement sums; what the dashboard's summary counts (service/store/reports.py). A report's
  refusal codes are one key part, sorted and joined with a space (the dispatch's codes have
  none), so a summary filtered by a refusal code, and the count of refusals by code, are read
  from the same rows.
- ``sink_set_hours`` and ``sink_set_days`` (UTC days): per sink and set, the reports, those
  where no path ran, and the latest report's time; ``sink_sets``: per sink and set, the latest
  report's time. What the fleet tables read (service/store/fleet.py): a month is about thirty
  rows a sink and set, whatever the number of reports, and the last-seen time is exact.
- ``sink_hours`` and ``sink_days``: the same per sink, every set together, with the decodes
  (:data:`DECODES`: a decode's first report): what the sinks table reads when no set is asked
  (a month is thirty rows a sink) and the decodes per sink class (service/store/class_decodes.py);
  folded like the others (:data:`TABLES`), read through :func:`current`.
- ``exact_days`` and ``exact_groups``: the exact tier's decodes (a report that ran at
  ``decode-equivalence`` with a set and a symbols digest) per set and symbols digest, per UTC
  day with the RGB digest, sink and request digest (``""``: none), and every day together with
  the least and greatest RGB digest reported, so a group whose decodes ever disagreed is
  flagged when it is folded; what the exact tier's table reads (service/store/fleet.py).
  ``exact_group_days``: per set and UTC day, the groups whose latest decode is of that day,
  moved by the fold as it moves a group's latest time (:func:`_group_days`); the exact tier
  table's total of a window is its rows' sum for the whole days.
- ``run_report_rollups``: run reports per hour, sink, class and verdict, what the dashboard's
  run-report counts read (service/store/policies.py, service/store/fleet.py), counted
  (:func:`add_run`) in the transaction that inserts the run report, only when its row went in.

The report roll-ups are off the acknowledgement path: a writer inserts each report with a
``report_inbox`` row (its ``seq``, service/store/bulk.py, bulk_pg.py), and :func:`fold`
(service/store/aggregator.py's thread) takes a batch of the inbox and counts its reports in,
in one transaction, with one ``INSERT … SELECT … GROUP BY … ON CONFLICT DO UPDATE`` a table: a
report skipped as already stored (a spool replay, a retried request) has no inbox row, so it
never counts twice, and a fold that rolls back (killed, the store down) leaves its reports in
the inbox for the next. What a report counts for is :func:`keyed`, read by the fold, by the
``rebuild`` functions (the migrations that add the roll-ups, :func:`rebuild_sinks` among them)
and by :func:`current`, what every reader reads: the roll-ups plus the reports still in the
inbox, so every count is exact at any instant, however far the fold lags. Pruning reports
(service/store/retention.py) leaves the roll-ups as they are (and a report in the inbox until
it is folded); pruning roll-ups moves their horizon (:func:`horizon_of`), and no report of an
hour before it is counted in any (a late report never brings a pruned hour back). Every
upsert writes its rows in key order: two folds on PostgreSQL lock the rows they share in the
same order, so they wait, never deadlock.

tools/seed_reports.py, loading reports in bulk, upserts each chunk's counts itself, through the
driver."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from sqlalchemy import (
    BigInteger,
    Connection,
    Select,
    String,
    Subquery,
    Table,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    inspect,
    literal,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.service.store.models import (
    ExactDayRow,
    ExactGroupDayRow,
    ExactGroupRow,
    HorizonRow,
    InboxRow,
    RefusalRow,
    ReportRow,
    RollupRow,
    RunReportRollupRow,
    RunReportRow,
    SinkDayRow,
    SinkHourRow,
    SinkRollupRow,
    SinkSetDayRow,
    SinkSetHourRow,
    SinkSetRow,
)
from wai_dispatch.service.store.records import UNITS

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
FLEET: Table = RollupRow.__table__  # type: ignore[assignment]
SINK: Table = SinkRollupRow.__table__  # type: ignore[assignment]
HOURS: Table = SinkSetHourRow.__table__  # type: ignore[assignment]
DAYS: Table = SinkSetDayRow.__table__  # type: ignore[assignment]
PAIRS: Table = SinkSetRow.__table__  # type: ignore[assignment]
SINK_HOURS: Table = SinkHourRow.__table__  # type: ignore[assignment]
SINK_DAYS: Table = SinkDayRow.__table__  # type: ignore[assignment]
RUNS: Table = RunReportRollupRow.__table__  # type: ignore[assignment]
EXACT_DAYS: Table = ExactDayRow.__table__  # type: ignore[assignment]
EXACT_GROUPS: Table = ExactGroupRow.__table__  # type: ignore[assignment]
GROUP_DAYS: Table = ExactGroupDayRow.__table__  # type: ignore[assignment]
INBOX: Table = InboxRow.__table__  # type: ignore[assignment]
HORIZON: Table = HorizonRow.__table__  # type: ignore[assignment]
#: A time range ``[from, to)``; a ``None`` end: unbounded.
Range = tuple[int | None, int | None]
R = ReportRow.__table__.c
RR = RunReportRow.__table__.c


def hour_of(ms: int) -> int:
    """The first millisecond of the hour ``ms`` lies in (aligned to the Unix epoch)."""
    return ms - ms % HOUR_MS


def day_of(ms: int) -> int:
    """The first millisecond of the UTC day ``ms`` lies in."""
    return ms - ms % DAY_MS


def codes_of(codes: Iterable[str]) -> str:
    """The refusal-codes key part of a report refused with ``codes`` (any order, repeats kept)."""
    return " ".join(sorted(codes))


def cut(lo: int | None, hi: int | None, step: int = HOUR_MS) -> tuple[list[Range], Range | None]:
    """``[lo, hi)`` as the ranges at its edges that are no whole ``step`` (read from the rows)
    and the whole steps between them (read from a roll-up; ``None``: none)."""
    s0 = None if lo is None else -(-lo // step) * step
    s1 = None if hi is None else hi - hi % step
    if s0 is not None and s1 is not None and s0 >= s1:
        return [(lo, hi)], None
    edges: list[Range] = []
    if lo is not None and s0 is not None and lo < s0:
        edges.append((lo, s0))
    if hi is not None and s1 is not None and s1 < hi:
        edges.append((s1, hi))
    return edges, (s0, s1)


def between(col: Any, lo: int | None, hi: int | None) -> list[ColumnElement[bool]]:
    """The conditions ``lo <= col < hi`` (none for a ``None`` end)."""
    return [*([] if lo is None else [col >= lo]), *([] if hi is None else [col < hi])]


def within(col: Any, ranges: Sequence[Range]) -> list[ColumnElement[bool]]:
    """The condition that ``col`` lies in one of ``ranges`` (none when one is unbounded)."""
    spans = [between(col, lo, hi) for lo, hi in ranges]
    return [] if [] in spans else [or_(*(and_(*s) for s in spans))]


def upsert_of(conn: Connection, table: Any) -> Any:
    """The dialect's ``INSERT`` into ``table``, which takes ``ON CONFLICT``."""
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def upsert(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    keys: Sequence[str],
    sums: Sequence[str] = (),
    latest: str | None = None,
) -> None:
    """Insert ``rows``; a row whose ``keys`` are stored adds its ``sums`` to the stored row's
    and keeps the later of the two ``latest``."""
    ins = upsert_of(conn, table)
    put = {s: table.c[s] + ins.excluded[s] for s in sums}
    if latest is not None:
        pg = conn.dialect.name == "postgresql"
        put[latest] = (func.greatest if pg else func.max)(table.c[latest], ins.excluded[latest])
    conn.execute(ins.on_conflict_do_update(index_elements=list(keys), set_=put), rows)


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


#: A report that counts as a decode: a decode's first report (the service's primary, ordinal 0;
#: each decode of a run report), so each decode counts once however many reports it has.
DECODES = R.role == "primary"


def add_run(
    conn: Connection, *, sink: str, sink_class: str | None, accepted: bool, received_ms: int
) -> None:
    """Count one run report just inserted, in the caller's transaction."""
    row = {
        "hour_ms": hour_of(received_ms),
        "sink": sink,
        "sink_class": sink_class or "",
        "accepted": accepted,
        "n": 1,
        "last_ms": received_ms,
    }
    upsert(conn, RUNS, row, ["hour_ms", "sink", "sink_class", "accepted"], ["n"], "last_ms")


def run_counts(
    conn: Connection,
    by: Literal["class", "sink"],
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    sink_class: str | None = None,
    sink: str | None = None,
) -> dict[tuple[str | None, bool], tuple[int, int]]:
    """Per ``by`` (the class, ``None``: none; or the sink) and verdict (accepted or not): the
    run reports received in ``[since_ms, until_ms)`` and the latest's time, whole hours from
    the roll-ups and the partial hours at the window's edges from ``run_reports`` (received
    time, indexed): exact for any window. ``sink_class`` and ``sink``: only those."""
    raw, hours = cut(since_ms, until_ms)
    out: dict[tuple[str | None, bool], tuple[int, int]] = {}
    u = RUNS.c
    parts: list[tuple[Any, ...]] = []
    parts += [] if hours is None else [(u, u.hour_ms, hours, func.sum(u.n), func.max(u.last_ms))]
    parts += [(RR, RR.received_ms, span, func.count(), func.max(RR.received_ms)) for span in raw]
    for c, time, (lo, hi), n, last in parts:
        where = between(time, lo, hi)
        if sink_class:
            where.append(c.sink_class == sink_class)
        if sink:
            where.append(c.sink == sink)
        col = c.sink_class if by == "class" else c.sink
        query = select(col, c.accepted, n, last).where(*where).group_by(col, c.accepted)
        for key, accepted, count, latest in conn.execute(query).all():
            k = (key or None) if by == "class" else key
            had = out.get((k, bool(accepted)), (0, 0))
            out[(k, bool(accepted))] = (had[0] + int(count), max(had[1], int(latest)))
    return out


#: Which reports by their ``seq``: the conditions on a column of report seqs.
Which = Callable[[Any], list[ColumnElement[bool]]]


def keyed(
    conn: Connection,
    which: Which | None = None,
    *,
    fenced: bool = False,
    horizon: Any = None,
    within: tuple[Any, Any] | None = None,
    exact: bool = False,
) -> Subquery:
    """The reports ``which`` selects (all: ``None``), each as its roll-up keys and the sums
    it adds: the one definition of what a report counts for in every report roll-up, read by
    :func:`fold`, :func:`rebuild`, :func:`rebuild_activity`, :func:`rebuild_sinks` and
    :func:`current`. Its refusal codes sorted and joined (:func:`_codes_per_report`), its hour
    and UTC day, ``""`` for a key part it lacks, ``no_path`` 1 when it was refused,
    ``decodes`` 1 when it is a decode's first report (:data:`DECODES`), and its time as
    ``last_ms``. ``horizon`` (a value or a scalar subquery; ``None``: none): only the reports
    of that hour or later, the hours the roll-ups may hold (:func:`horizon_of`). ``within``:
    the first and last ``created_ms`` of the reports ``which`` selects, when known (a fold on
    PostgreSQL, whose ``reports`` is partitioned by day: the partitions outside are not read).
    ``exact``: with the exact tier's key parts too (:func:`_exact_parts`), which a schema
    before migration 0010 lacks (its rebuilds read without)."""
    per_report = _codes_per_report(conn, which)
    hour = R.created_ms - R.created_ms % HOUR_MS
    source = ReportRow.__table__.outerjoin(per_report, per_report.c.report_seq == R.seq)

    return (
        select(
            R.sink,
            hour.label("hour_ms"),
            (hour - hour % DAY_MS).label("day_ms"),
            R.capability,
            func.coalesce(R.set_digest, "").label("set_digest"),
            func.coalesce(R.path_ran, "").label("path"),
            func.coalesce(R.tier, "").label("tier"),
            R.outcome,
            func.coalesce(per_report.c.codes, "").label("codes"),
            *(R[f"placement_{u}"] for u in UNITS),
            case((R.outcome == "refused", 1), else_=0).label("no_path"),
            case((DECODES, 1), else_=0).label("decodes"),
            R.created_ms.label("last_ms"),
            *(_exact_parts() if exact else []),
        )
        .select_from(source)
        .where(*([] if which is None else which(R.seq)))
        # its hour, not its time: a term no planner reads ``reports`` by (``created_ms >= 0``
        # would be every report, where the inbox finds a few)
        .where(*([] if horizon is None else [hour >= horizon]))
        .where(*([] if within is None else [R.created_ms.between(*within)]))
        # ``fenced``: ``OFFSET 0``, so neither planner pushes a reader's conditions into it
        # (they would walk an index of ``reports`` and test each row against the inbox): its
        # reports are found from the inbox's few rows, by their seq
        .offset(0 if fenced else None)
        .subquery("keyed")
    )


def _exact_parts() -> list[Any]:
    """The exact tier's key parts of a report, for :func:`keyed`: its symbols, RGB and request
    digests (``""`` for none) and the RGB digest as reported (for the least and greatest)."""
    return [
        func.coalesce(R.symbols_digest, "").label("symbols_digest"),
        func.coalesce(R.rgb_digest, "").label("rgb_digest"),
        R.rgb_digest.label("rgb_known"),
        func.coalesce(R.request_digest, "").label("request_digest"),
    ]


def _codes_per_report(conn: Connection, which: Which | None) -> Subquery:
    """Each report's refusal codes (of the reports ``which`` selects) sorted and joined by a
    space, as ``codes`` beside its ``report_seq``: PostgreSQL's ``string_agg … ORDER BY``;
    SQLite's ``group_concat`` over rows already in code order, the order it concatenates in."""
    f = RefusalRow.__table__.c
    mine = [] if which is None else which(f.report_seq)
    if conn.dialect.name == "postgresql":
        in_order = postgresql.aggregate_order_by(literal(" "), f.code)
        return (
            select(f.report_seq, func.string_agg(f.code, in_order).label("codes"))
            .where(*mine)
            .group_by(f.report_seq)
            .subquery()
        )
    o = select(f.report_seq, f.code).where(*mine).order_by(f.report_seq, f.code).subquery()
    return (
        select(o.c.report_seq, func.group_concat(o.c.code, literal(" ")).label("codes"))
        .group_by(o.c.report_seq)
        .subquery()
    )


#: The roll-up tables :func:`fold` counts reports into, in the order it writes them.
TABLES = (FLEET, SINK, HOURS, DAYS, PAIRS, SINK_HOURS, SINK_DAYS, EXACT_DAYS, EXACT_GROUPS)
#: The column of :func:`keyed` a table's ``start_ms`` is.
_START = {
    "sink_set_hours": "hour_ms",
    "sink_set_days": "day_ms",
    "sink_hours": "hour_ms",
    "sink_days": "day_ms",
    "exact_days": "day_ms",
}
#: The reports a table counts (every report where none is named): the exact tier's roll-ups
#: count the reports that ran at ``decode-equivalence`` with a set and a symbols digest (the
#: decodes fleet.exact_table groups; a report has a tier only when a path ran).
_ONLY: dict[str, Callable[[Subquery], list[ColumnElement[bool]]]] = {
    name: lambda k: [
        k.c.tier == "decode-equivalence",
        k.c.set_digest != "",
        k.c.symbols_digest != "",
    ]
    for name in ("exact_days", "exact_groups")
}
#: A column that is neither a sum nor ``last_ms``: how it is aggregated, and from which column
#: of :func:`keyed` (the least and greatest RGB digest reported: ``NULL`` for none).
_EXTREMES = {"rgb_least": ("min", "rgb_known"), "rgb_greatest": ("max", "rgb_known")}


def grouped(conn: Connection, table: Table, k: Subquery, *, ordered: bool = False) -> Select[Any]:
    """The reports of ``k`` (:func:`keyed`) as ``table``'s rows, its columns in order: grouped
    by its primary key, ``n`` their count, ``last_ms`` the latest, every other column a sum.
    ``ordered``: in key order (``COLLATE "C"`` on PostgreSQL, code-point order as on SQLite), so
    two transactions that upsert rows they share lock them in the same order, and wait, never
    deadlock."""
    pg = conn.dialect.name == "postgresql"
    keys = [c.name for c in table.primary_key.columns]
    source = {c: k.c[_START[table.name] if c == "start_ms" else c] for c in keys}
    cols: list[Any] = []
    for c in table.c:
        if c.name in source:
            cols.append(source[c.name].label(c.name))
        elif c.name == "n":
            cols.append(func.count().label("n"))
        elif c.name == "last_ms":
            cols.append(func.max(k.c.last_ms).label("last_ms"))
        elif c.name in _EXTREMES:
            how, of = _EXTREMES[c.name]
            cols.append(getattr(func, how)(k.c[of]).label(c.name))
        else:
            cols.append(func.sum(k.c[c.name]).label(c.name))
    only = _ONLY[table.name](k) if table.name in _ONLY else []
    query = select(*cols).where(true(), *only).group_by(*source.values())
    if ordered:
        order = [
            v.collate("C") if pg and isinstance(table.c[c].type, String) else v
            for c, v in source.items()
        ]
        query = query.order_by(*order)
    return query


def _count_into(conn: Connection, table: Table, k: Subquery) -> None:
    """Add the reports of ``k`` to ``table``: one ``INSERT … SELECT … GROUP BY … ON CONFLICT DO
    UPDATE`` (sums added, the later ``last_ms`` kept)."""
    conn.execute(_counted(conn, table, k))


def _counted(conn: Connection, table: Table, k: Subquery) -> Any:
    """:func:`_count_into`'s statement."""
    keys = [c.name for c in table.primary_key.columns]
    ins = upsert_of(conn, table).from_select(
        [c.name for c in table.c], grouped(conn, table, k, ordered=True)
    )
    pg = conn.dialect.name == "postgresql"
    put: dict[str, Any] = {}
    for c in table.c:
        if c.name in keys:
            continue
        if c.name == "last_ms":
            put[c.name] = (func.greatest if pg else func.max)(c, ins.excluded[c.name])
        elif c.name in _EXTREMES:  # either may be NULL (none reported): the other then
            pick = {"min": func.least if pg else func.min, "max": func.greatest if pg else func.max}
            new = ins.excluded[c.name]
            put[c.name] = pick[_EXTREMES[c.name][0]](func.coalesce(c, new), func.coalesce(new, c))
        else:
            put[c.name] = c + ins.excluded[c.name]
    return ins.on_conflict_do_update(index_elements=keys, set_=put)


#: Reports a fold takes at most, per dialect: SQLite's fold holds its one writer lock, which the
#: reports' commits wait for (at most their 1 s busy timeout), so it folds small batches, one
#: transaction each, and the commits go in between; PostgreSQL's locks only roll-up rows, which no
#: writer takes.
FOLD_BATCH = {"sqlite": 1000, "postgresql": 5000}


def fold(conn: Connection, limit: int | None = None) -> int:
    """Count up to ``limit`` reports of the inbox into every report roll-up and take them out
    of it, in the caller's transaction (both or neither: a fold killed half way rolls back, and
    the reports are still in the inbox), the oldest first; returns how many. PostgreSQL: the
    batch is deleted first (``DELETE … RETURNING``) from rows locked ``FOR UPDATE SKIP LOCKED``,
    so folds in several processes take disjoint batches; SQLite: the caller's transaction holds
    the one writer lock from its start (``BEGIN IMMEDIATE``, :func:`begin_fold`), the batch is
    the inbox's first ``limit`` rows, counted, then deleted. ``None``: :data:`FOLD_BATCH`."""
    limit = FOLD_BATCH.get(conn.dialect.name, 1000) if limit is None else limit
    i = INBOX.c
    since = horizon_of(conn, lock=True)
    counts = _fold_statements(conn)
    if conn.dialect.name == "postgresql":
        pick = select(i.seq).order_by(i.seq).limit(limit).with_for_update(skip_locked=True)
        taken = delete(INBOX).where(i.seq.in_(pick.scalar_subquery())).returning(i.seq)
        seqs = [int(s) for s in conn.execute(taken).scalars()]
        if not seqs:
            return 0
        arr = bindparam("taken", seqs, type_=postgresql.ARRAY(BigInteger))
        # the batch's span of time, read once: each table's statement then reads only the
        # partitions of ``reports`` (one a day, service/store/partitions.py) that hold it,
        # not every partition's index for each seq
        lo, hi = conn.execute(
            select(func.min(R.created_ms), func.max(R.created_ms)).where(R.seq == any_(arr))
        ).one()
        span = {"from_ms": 0, "to_ms": -1} if lo is None else {"from_ms": int(lo), "to_ms": int(hi)}
        for statement in counts:
            conn.execute(statement, {"taken": seqs, "horizon": since, **span})
        return len(seqs)
    first = select(i.seq).order_by(i.seq).limit(limit).subquery()
    hi = conn.execute(select(func.max(first.c.seq))).scalar()
    if hi is None:
        return 0
    for statement in counts:
        conn.execute(statement, {"hi": hi, "horizon": since})
    return int(conn.execute(delete(INBOX).where(i.seq <= hi)).rowcount)


#: :func:`fold`'s upserts by dialect (one a table of :data:`TABLES`), built once with the batch
#: (``taken``: its seqs, and ``from_ms``/``to_ms``: their span of time, PostgreSQL; ``hi``: its
#: last seq, SQLite) and the ``horizon`` bound at
#: each fold: built anew, a fold of a few reports spent most of its CPU making them again.
_FOLDS: dict[str, tuple[Any, ...]] = {}


def _fold_statements(conn: Connection) -> tuple[Any, ...]:
    name = conn.dialect.name
    if name not in _FOLDS:
        horizon = bindparam("horizon", type_=BigInteger)
        which: Which
        if name == "postgresql":
            arr = bindparam("taken", type_=postgresql.ARRAY(BigInteger))
            which = lambda seq: [seq == any_(arr)]  # noqa: E731
            span = (bindparam("from_ms", type_=BigInteger), bindparam("to_ms", type_=BigInteger))
        else:
            hi = bindparam("hi", type_=BigInteger)
            which = lambda seq: [seq.in_(select(INBOX.c.seq).where(INBOX.c.seq <= hi))]  # noqa: E731
            span = None
        k = keyed(conn, which, horizon=horizon, within=span, exact=True)
        statements: list[Any] = []
        for table in TABLES:  # the groups' days moved before the groups' latest times
            statements += _group_days(conn, k) if table is EXACT_GROUPS else []
            statements.append(_counted(conn, table, k))
        _FOLDS[name] = tuple(statements)
    return _FOLDS[name]


#: The transaction lock (``pg_advisory_xact_lock``) PostgreSQL's folds take before they move the
#: groups' days: a fold reads a group's latest time and then moves it, and another process's
#: fold of the same group in between would move it from the same day twice.
GROUP_DAYS_LOCK = 0x5741_1D18


def _group_days(conn: Connection, k: Subquery) -> list[Any]:
    """The fold's statements that move ``exact_group_days`` for the reports of ``k`` (run before
    ``exact_groups``' upsert, which they read as it stands): each group of the batch counts on
    the day of its new latest time (the later of its stored one and the batch's) and no longer
    on its stored one's; a day left with none is deleted. On PostgreSQL, under
    :data:`GROUP_DAYS_LOCK` (held to the commit: concurrent folds take turns from here to their
    end, the groups' upsert being their last statement); SQLite's fold is the one writer."""
    pg = conn.dialect.name == "postgresql"
    batch = grouped(conn, EXACT_GROUPS, k).subquery("batch")
    b, g = batch.c, EXACT_GROUPS.c
    joined = batch.outerjoin(
        EXACT_GROUPS, and_(g.set_digest == b.set_digest, g.symbols_digest == b.symbols_digest)
    )
    later = (func.greatest if pg else func.max)(b.last_ms, func.coalesce(g.last_ms, b.last_ms))
    plus = select(b.set_digest, (later - later % DAY_MS).label("start_ms"), literal(1).label("d"))
    minus = select(b.set_digest, g.last_ms - g.last_ms % DAY_MS, literal(-1))
    moved = union_all(
        plus.select_from(joined), minus.select_from(joined).where(g.last_ms.is_not(None))
    ).subquery("moved")
    m = moved.c
    digest = m.set_digest.collate("C") if pg else m.set_digest
    sums = (
        select(m.set_digest, m.start_ms, func.sum(m.d))
        .where(true())
        .group_by(m.set_digest, m.start_ms)
        .having(func.sum(m.d) != 0)
        .order_by(digest, m.start_ms)  # key order: see upsert
    )
    ins = upsert_of(conn, GROUP_DAYS).from_select(["set_digest", "start_ms", "n"], sums)
    up = ins.on_conflict_do_update(
        index_elements=["set_digest", "start_ms"], set_={"n": GROUP_DAYS.c.n + ins.excluded.n}
    )
    gone = delete(GROUP_DAYS).where(GROUP_DAYS.c.n == 0)
    lock = [select(func.pg_advisory_xact_lock(GROUP_DAYS_LOCK))] if pg else []
    return [*lock, up, gone]


def horizon_of(conn: Connection, *, lock: bool = False) -> int:
    """The roll-ups' horizon: the first hour they may hold (``rollup_horizon``; 0: none pruned,
    or a schema before it, migration 0015). Retention moves it forward in the transaction that
    prunes the roll-ups before it (service/store/retention.py); every fold, rebuild and
    :func:`current` counts only the reports of its hour or later, so a report that arrives
    (or is folded) after its hour was pruned brings no row of that hour back: it is counted
    in no roll-up, as if it had been pruned with them. ``lock``: on PostgreSQL, read it ``FOR
    SHARE``, so a fold and retention's move of it take turns (a fold that began before the move
    counts before retention deletes; one after reads the new horizon); SQLite's fold and
    retention already take turns (one writer)."""
    if not inspect(conn).has_table(HORIZON.name):
        return 0
    query = select(HORIZON.c.before_ms).where(HORIZON.c.id == 1)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    found = conn.execute(query).scalar()
    return 0 if found is None else int(found)


def begin_fold(conn: Connection) -> None:
    """Start ``conn``'s transaction for :func:`fold`: on SQLite as the writer
    (``BEGIN IMMEDIATE``: its first statement reads, and a read transaction that then writes
    fails at once, not after the busy timeout, when another connection wrote meanwhile)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def fold_all(conn: Connection) -> int:
    """Fold the whole inbox in the caller's transaction (a downgrade; tests)."""
    total = 0
    while n := fold(conn):
        total += n
    return total


def inbox(conn: Connection) -> tuple[int, int | None]:
    """The reports in the inbox (not yet in the roll-ups) and the oldest one's ``seq``."""
    n, oldest = conn.execute(select(func.count(), func.min(INBOX.c.seq))).one()
    return int(n), None if oldest is None else int(oldest)


def current(conn: Connection, table: Table) -> Subquery:
    """The report roll-up ``table`` as it stands with every stored report counted: its rows and,
    beside them, the reports still in the inbox grouped the same way (:func:`grouped`); a key
    may have a row of each, so a reader sums (``n``, the placements) or takes the greatest
    (``last_ms``), as every reader of the roll-ups does. Read in one statement (one snapshot),
    it is exact whatever a fold does meanwhile: a report is in the inbox or in the roll-up. A
    report in the inbox of an hour before the horizon (:func:`horizon_of`) is left out, as the
    fold leaves it. The columns are ``table``'s, by name."""
    return union_all(select(*table.c), pending(conn, table)).subquery(f"{table.name}_now")


#: :func:`pending`'s statements, per dialect and table: built once (they have no value of a
#: call's own), so a reader builds only its own conditions around them.
_PENDING: dict[tuple[str, str], Select[Any]] = {}


def pending(conn: Connection, table: Table) -> Select[Any]:
    """The reports still in the inbox as ``table``'s rows (:func:`grouped`), those of an hour
    before the horizon left out: :func:`current`'s second part, which a reader of the inbox
    alone also reads. One statement per dialect and table, built on its first use."""
    key = (conn.dialect.name, table.name)
    found = _PENDING.get(key)
    if found is None:
        h = select(func.coalesce(func.max(HORIZON.c.before_ms), 0)).scalar_subquery()
        inbox: Which = lambda seq: [seq.in_(select(INBOX.c.seq))]  # noqa: E731
        rows = keyed(conn, inbox, fenced=True, horizon=h, exact=table.name in _ONLY)
        found = _PENDING[key] = grouped(conn, table, rows)
    return found


def _folded(conn: Connection) -> Which | None:
    """The reports the roll-ups count with the inbox not folded in: every report, less those
    still in the inbox (when there is one: the migrations before 0013 rebuild without)."""
    if not inspect(conn).has_table(INBOX.name):
        return None
    return lambda seq: [seq.not_in(select(INBOX.c.seq))]


def rebuild(conn: Connection) -> int:
    """Recompute both report roll-ups from the stored reports, in the caller's transaction
    (whatever they held is replaced; the reports in the inbox are left to the fold); returns
    the fleet table's rows."""
    k = keyed(conn, _folded(conn), horizon=horizon_of(conn))
    for table in (SINK, FLEET):
        conn.execute(delete(table))
        conn.execute(insert(table).from_select([c.name for c in table.c], grouped(conn, table, k)))
    return int(conn.execute(select(func.count()).select_from(FLEET)).scalar_one())


def rebuild_activity(conn: Connection) -> None:
    """Recompute the hours and the days from the stored reports, in the caller's transaction
    (the reports in the inbox are left to the fold)."""
    k = keyed(conn, _folded(conn), horizon=horizon_of(conn))
    for table in (HOURS, DAYS):
        conn.execute(delete(table))
        conn.execute(insert(table).from_select([c.name for c in table.c], grouped(conn, table, k)))


def rebuild_sinks(conn: Connection) -> None:
    """Recompute ``sink_hours`` and ``sink_days`` from the stored reports, in the caller's
    transaction, as the fold counts them (:func:`keyed`; the decodes: :data:`DECODES`; the
    reports in the inbox are left to the fold)."""
    k = keyed(conn, _folded(conn), horizon=horizon_of(conn))
    for table in (SINK_HOURS, SINK_DAYS):
        conn.execute(delete(table))
        conn.execute(insert(table).from_select([c.name for c in table.c], grouped(conn, table, k)))


def rebuild_exact(conn: Connection) -> None:
    """Recompute ``exact_days`` and ``exact_groups`` from the stored reports, in the caller's
    transaction, as the fold counts them (:func:`keyed`; the reports in the inbox are left to
    the fold)."""
    k = keyed(conn, _folded(conn), horizon=horizon_of(conn), exact=True)
    for table in (EXACT_DAYS, EXACT_GROUPS):
        conn.execute(delete(table))
        conn.execute(insert(table).from_select([c.name for c in table.c], grouped(conn, table, k)))


def rebuild_group_days(conn: Connection) -> None:
    """Recompute ``exact_group_days`` from ``exact_groups`` (after :func:`rebuild_exact`;
    migration 0018 fills it, and tools/seed_reports.py after its load), in the caller's
    transaction."""
    g = EXACT_GROUPS.c
    day = (g.last_ms - g.last_ms % DAY_MS).label("start_ms")
    conn.execute(delete(GROUP_DAYS))
    counts = select(g.set_digest, day, func.count()).group_by(g.set_digest, day)
    conn.execute(insert(GROUP_DAYS).from_select(["set_digest", "start_ms", "n"], counts))


def rebuild_pairs(conn: Connection) -> None:
    """Recompute ``sink_sets`` from the days (after :func:`rebuild_activity`; migration 0009
    fills it itself: 0008's call of :func:`rebuild_activity` runs before the table exists)."""
    d = DAYS.c
    conn.execute(delete(PAIRS))
    latest = select(d.sink, d.set_digest, func.max(d.last_ms)).group_by(d.sink, d.set_digest)
    conn.execute(insert(PAIRS).from_select(["sink", "set_digest", "last_ms"], latest))


def rebuild_runs(conn: Connection) -> None:
    """Recompute the run reports' roll-ups from the stored run reports, in the caller's
    transaction."""
    hour = (RR.received_ms - RR.received_ms % HOUR_MS).label("hour_ms")
    cls = func.coalesce(RR.sink_class, "").label("sink_class")
    conn.execute(delete(RUNS))
    counts = select(hour, RR.sink, cls, RR.accepted, func.count(), func.max(RR.received_ms))
    cols = ["hour_ms", "sink", "sink_class", "accepted", "n", "last_ms"]
    conn.execute(insert(RUNS).from_select(cols, counts.group_by(hour, RR.sink, cls, RR.accepted)))
