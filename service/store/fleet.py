"""The dashboard's per-sink and per-set tables: for each sink (or set) of a window, its reports,
the reports where no path ran and their share, its request errors, its run reports' verdicts
and when it was last seen; sorted, with the total of rows and one page of them (keyset:
``after`` the cursor ``next``).

Report counts come from the per-sink activity roll-ups (service/store/rollups.py: whole days,
whole hours, and the reports for the window's partial hours) when the filters are only sinks,
a set and the window; from the per-hour roll-ups and the reports for the edges otherwise (the
split of service/store/reports.py's summary, so they agree with it); a filter the roll-ups
cannot answer (a refusal code, a request id) reads the reports only. The last-seen time is the
latest report of the window (an hour's start, from the per-hour roll-ups, when its reports were
pruned), request error or run report (run reports counted from their roll-ups).

Both tables read the same statements (:func:`_parts`). The sinks table is one SQL statement
(its total beside its page; a second only for a page past the last row): every known sink,
each sink the policy in force names, each live token with the sink role and each sink with
activity in the window, is a row, seen or not, so a sink that went quiet shows (a sink no
class names is ``class: null``); counted, filtered, sorted and paged by the database
(:func:`sink_table`).
The sets table of a window that reaches now reads rows a set, not a sink and day
(:func:`_sets_up_to_now`); sorted and paged in Python (:func:`_page`).

The exact tier's table (:func:`exact_table`) groups the window's integer decodes by set and
symbols digest, their distinct RGB digests beside them: more than one is a broken promise."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    Connection,
    Float,
    RowMapping,
    Select,
    String,
    Subquery,
    and_,
    case,
    cast,
    distinct,
    false,
    func,
    literal,
    or_,
    select,
    union,
    union_all,
)

from wai_dispatch.service.store import keyset
from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.store.models import DISAGREE, EXACT, SetRow, TokenRow
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters, R, rollup_where, set_versions, split
from wai_dispatch.service.store.request_error_views import errors_by_sink
from wai_dispatch.service.store.rollups import (
    DAY_MS,
    DAYS,
    EXACT_DAYS,
    EXACT_GROUPS,
    FLEET,
    GROUP_DAYS,
    HOUR_MS,
    HOURS,
    PAIRS,
    RR,
    RUNS,
    SINK,
    SINK_DAYS,
    SINK_HOURS,
    Range,
    between,
    current,
    cut,
    horizon_of,
    pending,
    within,
)

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_FOLD = str.maketrans(_UPPER, _UPPER.lower())

__all__ = ["SET_SORTS", "SINK_SORTS", "exact_groups", "exact_table", "set_table", "sink_table"]

S = SetRow.__table__.c
T = TokenRow.__table__.c
SINK_SORTS = ("sink", "reports", "no_path_rate", "request_errors", "runs_refused", "last_seen_ms")
SET_SORTS = ("set", "reports", "no_path_rate", "sinks", "last_seen_ms")
#: The type of each sort's value in a cursor (the counts: an int); ``None`` where a row has none.
_KINDS = {
    "sink": keyset.STR,
    "set": keyset.STR,
    "no_path_rate": (*keyset.NUMBER, type(None)),
    "last_seen_ms": (*keyset.INT, type(None)),
}


def _blank() -> dict[str, Any]:
    return {"reports": 0, "no_path": 0, "last_seen_ms": None, "sinks": set()}


def _seen(row: dict[str, Any], ms: int | None) -> None:
    if ms is not None and (row["last_seen_ms"] is None or ms > row["last_seen_ms"]):
        row["last_seen_ms"] = int(ms)


#: The filters the per-sink activity roll-ups answer.
_ACTIVITY = {"sink", "sinks", "set", "since_ms", "until_ms"}


def _spans(lo: int | None, hi: int | None) -> tuple[list[Range], list[Range], Range | None]:
    """``[lo, hi)`` cut into the partial hours at its edges (read from the reports), the whole
    hours outside whole days (from ``sink_set_hours``) and the whole days (``sink_set_days``;
    ``None``: none)."""
    raw, hours = cut(lo, hi)
    if hours is None:
        return raw, [], None
    edges, days = cut(*hours, DAY_MS)
    return raw, edges, days


def _counts(conn: Connection, filters: Filters) -> dict[str, dict[str, Any]]:
    """Per set: reports, no-path reports, last seen, sinks (:func:`_parts`)."""
    out: dict[str, dict[str, Any]] = {}
    parts = _parts(conn, filters, by_set=True)
    for digest, sink, n, no_path, last in conn.execute(union_all(*parts)) if parts else []:
        if digest:
            row = out.setdefault(digest, _blank())
            row["reports"] += int(n)
            row["no_path"] += int(no_path)
            row["sinks"].update([sink] if n else [])
            _seen(row, last)
    return out


def _sets_up_to_now(conn: Connection, filters: Filters) -> dict[str, dict[str, Any]] | None:
    """:func:`_counts` per set for a window that reaches now, from rows that do not grow with
    the sinks or the days: a set's reports and no-path reports from the fleet's per-hour
    roll-ups and the reports of the window's partial hours, its sinks and last-seen time from
    ``sink_sets`` (one row a sink and set: its latest report's time). Exact when every pair's
    latest report is before the window's end: then a sink used a set in the window exactly when
    that pair's latest report is at or after the window's start, and the set's latest report of
    the window is its pairs' latest. ``None`` otherwise, or for filters beyond the window."""
    if {k for k, v in vars(filters).items() if v is not None} - {"since_ms", "until_ms"}:
        return None
    p = current(conn, PAIRS).c
    if filters.until_ms is not None:
        latest = conn.execute(select(func.max(p.last_ms))).scalar()
        if latest is not None and int(latest) >= filters.until_ms:
            return None  # a pair's latest report is at or after the end: not exact here
    out: dict[str, dict[str, Any]] = {}
    raw, hours = split(filters, HOUR_MS)
    c = current(conn, FLEET).c
    parts: list[tuple[Any, ...]] = []
    parts += [] if hours is None else [(c.set_digest, c.outcome, func.sum(c.n), c.hour_ms, [hours])]
    parts += [(R.set_digest, R.outcome, func.count(), R.created_ms, raw)] if raw else []
    for digest_col, outcome_col, n_col, time, ranges in parts:
        query = select(digest_col, outcome_col, n_col).where(*within(time, ranges))
        for digest, outcome, n in conn.execute(query.group_by(digest_col, outcome_col)):
            if digest:
                row = out.setdefault(digest, _blank())
                row["reports"] += int(n)
                row["no_path"] += int(n) if outcome == "refused" else 0
    pairs = select(p.set_digest, p.sink, p.last_ms).where(
        *between(p.last_ms, filters.since_ms, None)
    )
    for digest, sink, last in conn.execute(pairs):
        if digest and digest in out:
            out[digest]["sinks"].add(sink)
            _seen(out[digest], last)
    return out


def _rate(row: dict[str, Any]) -> None:
    row["no_path_rate"] = row["no_path"] / row["reports"] if row["reports"] else None


def _before(a: tuple[Any, str], b: tuple[Any, str], desc: bool) -> bool:
    """Whether the row at position ``a`` (its sort value, its key) comes before ``b``: by the
    value (``desc``: largest first), a row without one last, ties in key order."""
    (va, ka), (vb, kb) = a, b
    if (va is None) != (vb is None):
        return vb is None
    if va is not None and va != vb:
        return bool(va > vb) if desc else bool(va < vb)
    return ka < kb


def _page(
    rows: list[dict[str, Any]], sort: str, desc: bool, key: str, limit: int, after: str | None
) -> dict[str, Any]:
    """One page of ``rows`` in the order asked, starting after the position of the cursor
    ``after`` (keyset: a row that came or went since moves no other row across pages)."""
    rows.sort(key=lambda r: r[key])
    present = [r for r in rows if r[sort] is not None]
    present.sort(key=lambda r: r[sort], reverse=desc)  # stable: ties stay in ``key`` order
    rows = present + [r for r in rows if r[sort] is None]
    start = 0
    if after is not None:
        kinds = [_KINDS.get(sort, keyset.INT), keyset.STR]
        value, name = keyset.decode(f"{key}:{sort}:{int(desc)}", after, kinds)
        at = (value, str(name))
        start = next(
            (i for i, r in enumerate(rows) if _before(at, (r[sort], r[key]), desc)), len(rows)
        )
    items = rows[start : start + limit]
    more = start + limit < len(rows)
    last = items[-1] if items else None
    return {
        "total": len(rows),
        "limit": limit,
        "sort": sort,
        "desc": desc,
        "items": items,
        "next": keyset.encode(f"{key}:{sort}:{int(desc)}", [last[sort], last[key]])
        if more and last is not None
        else None,
    }


def by_sink(filters: Filters, by_set: bool = False) -> bool:
    """Whether ``filters`` (only sinks and the window, :data:`_ACTIVITY`) are answered by the
    per-sink activity (``sink_days``, ``sink_hours``), which has no set."""
    return not by_set and filters.set is None


def _parts(conn: Connection, filters: Filters, *, by_set: bool = False) -> list[Any]:
    """Statements of ``(sink, reports, no-path reports, latest)`` (``by_set``: ``(set, sink,
    …)``) whose sums per sink (and set) are the reports that ``filters`` select: the activity
    roll-ups (whole days, whole hours) when the filters are only sinks, a set and the window,
    the per-hour roll-ups otherwise, and the reports of the window's partial hours; with the
    per-hour roll-ups, the time of the latest report still stored (they keep an hour's
    start)."""

    def big(x: Any) -> Any:
        return cast(x, BigInteger)

    def keys(c: Any) -> list[Any]:  # by sink first: SQLite walks ix_*_sink_start
        return [c.set_digest, c.sink] if by_set else [c.sink]

    refused = big(func.sum(case((R.outcome == "refused", 1), else_=0)))
    asked = {k for k, v in vars(filters).items() if v is not None}
    parts: list[Any] = []
    if asked <= _ACTIVITY and "" not in (filters.set, filters.sink):
        raw, hours, days = _spans(filters.since_ms, filters.until_ms)
        # per sink with no set asked: a row a sink and day (or hour), every set together; each
        # as it stands with the inbox's reports (rollups.current)
        day_t, hour_t = (SINK_DAYS, SINK_HOURS) if by_sink(filters, by_set) else (DAYS, HOURS)
        tables = [(current(conn, day_t).c, [days])] if days is not None else []
        tables += [(current(conn, hour_t).c, hours)] if hours else []
        for c, ranges in tables:
            where = within(c.start_ms, ranges)
            where += [] if filters.sink is None else [c.sink == filters.sink]
            where += [] if filters.sinks is None else [c.sink.in_(filters.sinks)]
            where += [] if filters.set is None else [c.set_digest == filters.set]
            sums = (big(func.sum(c.n)), big(func.sum(c.no_path)), func.max(c.last_ms))
            parts.append(select(*keys(c), *sums).where(*where).group_by(*keys(c)[::-1]))
    else:
        raw, whole = split(filters, HOUR_MS)
        if filters.reason is not None:
            raw, whole = [(filters.since_ms, filters.until_ms)], None
        if whole is not None:
            c = current(conn, SINK).c
            no_path = big(func.sum(case((c.outcome == "refused", c.n), else_=0)))
            parts.append(
                select(*keys(c), big(func.sum(c.n)), no_path, func.max(c.hour_ms))
                .where(*rollup_where(c, filters, whole))
                .group_by(*keys(c))
            )
            zero = literal(0, BigInteger)
            latest = select(*keys(R), zero, zero, func.max(R.created_ms))
            parts.append(latest.where(*filters.where()).group_by(*keys(R)))
    if raw:
        where = replace(filters, since_ms=None, until_ms=None).where() + within(R.created_ms, raw)
        parts.append(
            select(*keys(R), big(func.count()), refused, func.max(R.created_ms))
            .where(*where)
            .group_by(*keys(R))
        )
    return parts


def _runs_by_sink(since_ms: int | None, until_ms: int | None) -> list[Any]:
    """Statements of ``(sink, run reports accepted, refused, latest)`` whose sums per sink are
    the window's (rollups.run_counts' split: whole hours from the roll-ups, the edges from
    ``run_reports``)."""
    raw, hours = cut(since_ms, until_ms)
    u = RUNS.c
    spans: list[tuple[Any, ...]] = [] if hours is None else [(u, u.hour_ms, hours, u.n, u.last_ms)]
    spans += [(RR, RR.received_ms, span, literal(1), RR.received_ms) for span in raw]
    return [
        select(
            c.sink,
            cast(func.sum(case((c.accepted, n), else_=0)), BigInteger),
            cast(func.sum(case((c.accepted, 0), else_=n)), BigInteger),
            func.max(last),
        )
        .where(*between(time, lo, hi))
        .group_by(c.sink)
        for c, time, (lo, hi), n, last in spans
    ]


def _summed(parts: list[Any], names: Sequence[str]) -> Any:
    """The sums per sink (the last column: the latest) of ``parts``, as a subquery with
    ``names`` for its columns after ``sink``."""
    if not parts:
        blank = [literal(0, BigInteger)] * (len(names) - 1) + [literal(None, BigInteger)]
        parts = [select(literal("", String), *blank).where(false())]
    u = union_all(*parts).subquery()
    cols = list(u.c)
    sums = [cast(func.sum(c), BigInteger).label(n) for c, n in zip(cols[1:-1], names, strict=False)]
    top = func.max(cols[-1]).label(names[-1])
    return select(cols[0].label("sink"), *sums, top).group_by(cols[0]).cte()


def _known(conn: Connection, names: Sequence[str]) -> list[Any]:
    """The sinks of ``names`` (the policy's) and of every live token with the sink role."""
    tokens = select(T.name.label("sink")).where(T.role == Role.sink.name, T.revoked_ms.is_(None))
    if not names:
        return [tokens]
    if conn.dialect.name == "postgresql":
        each = func.json_array_elements_text(literal(sorted(names), JSON)).table_valued("value")
    else:
        each = func.json_each(json.dumps(sorted(names))).table_valued("value")
    return [tokens, select(each.c.value.label("sink"))]


def _latest(conn: Connection, *cols: Any) -> Any:
    """The greatest of ``cols`` that are not null (null: none)."""
    parts = [func.coalesce(c, -1) for c in cols]
    top = func.greatest(*parts) if conn.dialect.name == "postgresql" else func.max(*parts)
    return func.nullif(top, -1)


def sink_table(
    store: ReportStore,
    filters: Filters,
    *,
    classes: dict[str, str],
    sort: str = "sink",
    desc: bool = False,
    search: str | None = None,
    decoded_nothing: bool = False,
    limit: int = 50,
    after: str | None = None,
) -> dict[str, Any]:
    """One row per known sink: each sink ``classes`` (the policy's ``sink → class``) names,
    each live token with the sink role, each sink with reports, request errors or run reports
    in the window, its counts zero where it had none: reports, no-path reports and rate,
    request errors, run reports accepted and refused, class, last seen. Counted, filtered,
    sorted and paged in SQL. ``search``: sinks whose name holds it (ASCII letters in any case);
    ``decoded_nothing``: only the sinks none of whose reports of the window decoded."""
    sort = sort if sort in SINK_SORTS else "sink"
    with store.engine.connect() as conn:
        pg = conn.dialect.name == "postgresql"
        counts = _summed(_parts(conn, filters), ["reports", "no_path", "last"])
        errors = errors_by_sink(filters.since_ms, filters.until_ms).cte()
        runs = _summed(_runs_by_sink(filters.since_ms, filters.until_ms), ["ok", "no", "last"])
        seen = [select(t.c.sink) for t in (counts, errors, runs)]
        names = union(*_known(conn, list(classes)), *seen).subquery()
        n = names.c.sink
        where = _sink_names(n, filters, search, pg)
        reports = func.coalesce(counts.c.reports, 0)
        no_path = func.coalesce(counts.c.no_path, 0)
        where += [reports == no_path] if decoded_nothing else []
        joined = names.outerjoin(counts, counts.c.sink == n).outerjoin(errors, errors.c.sink == n)
        rows = (
            select(
                n.label("sink"),
                reports.label("reports"),
                no_path.label("no_path"),
                (cast(no_path, Float) / cast(func.nullif(reports, 0), Float)).label("no_path_rate"),
                func.coalesce(errors.c.n, 0).label("request_errors"),
                func.coalesce(runs.c.ok, 0).label("runs_accepted"),
                func.coalesce(runs.c.no, 0).label("runs_refused"),
                _latest(conn, counts.c.last, errors.c.last, runs.c.last).label("last_seen_ms"),
                func.count().over().label("total"),
            )
            .select_from(joined.outerjoin(runs, runs.c.sink == n))
            .where(*where)
            .subquery()
        )
        tag = f"sink:{sort}:{int(desc)}"
        page = _sink_page(rows, sort, desc, tag, after, pg)
        found = conn.execute(page.limit(limit + 1)).mappings().all()
        total = found[0]["total"] if found else None
        if total is None:  # past the last row: counted without the page
            total = conn.execute(select(func.count()).select_from(rows)).scalar_one()
    return _sink_answer(found, int(total), classes, limit=limit, sort=sort, desc=desc, tag=tag)


def _sink_answer(
    found: Sequence[RowMapping],
    total: int,
    classes: dict[str, str],
    *,
    limit: int,
    sort: str,
    desc: bool,
    tag: str,
) -> dict[str, Any]:
    """The sinks table's answer: the page of ``found`` (``limit`` rows and one more when a page
    follows) with each sink's class, and the cursor of the next page."""
    items = [
        {**{k: v for k, v in r.items() if k != "total"}, "class": classes.get(r["sink"])}
        for r in found[:limit]
    ]
    last = items[-1] if len(found) > limit else None
    return {
        "total": total,
        "limit": limit,
        "sort": sort,
        "desc": desc,
        "items": items,
        "next": None if last is None else keyset.encode(tag, [last[sort], last["sink"]]),
    }


def _sink_names(
    n: Any, filters: Filters, search: str | None, pg: bool
) -> list[ColumnElement[bool]]:
    """The conditions on a sink's name ``n``: not empty, the filters' sink or sinks, and
    ``search`` in it, ASCII letters in any case (SQLite's lower() folds only those; PostgreSQL's
    follows its locale, so it folds by translate): one answer whatever the store."""
    where = [n != ""]
    where += [] if filters.sink is None else [n == filters.sink]
    where += [] if filters.sinks is None else [n.in_(filters.sinks)]
    folded = func.translate(n, _UPPER, _UPPER.lower()) if pg else func.lower(n)
    return where + ([folded.contains(search.translate(_FOLD), autoescape=True)] if search else [])


def _sink_page(
    rows: Subquery, sort: str, desc: bool, tag: str, after: str | None, pg: bool
) -> Select[Any]:
    """The sinks table's rows in ``sort`` order (ties and the rows without a value by name, in
    code-point order on both stores), from the keyset cursor ``after`` (of ``tag``) on."""
    key = rows.c.sink.collate("C") if pg else rows.c.sink
    col = key if sort == "sink" else rows.c[sort]
    page = select(rows).order_by(col.is_(None), col.desc() if desc else col, key)
    if after is None:
        return page
    value, name = keyset.decode(tag, after, [_KINDS.get(sort, keyset.INT), keyset.STR])
    if value is None:  # a row with no value: only such rows follow it, by name
        return page.where(col.is_(None), key > name)
    later = col < value if desc else col > value
    return page.where(or_(col.is_(None), later, and_(col == value, key > name)))


def set_table(
    store: ReportStore,
    filters: Filters,
    *,
    sort: str = "reports",
    desc: bool = True,
    prefix: str | None = None,
    limit: int = 50,
    after: str | None = None,
) -> dict[str, Any]:
    """One row per set digest the window's reports name (the full 64 hex digits): reports,
    no-path reports and rate, sinks using it, last seen, and its name, capability and version
    when the set registry has it. ``prefix``: digests that start with it (any case)."""
    with store.engine.connect() as conn:
        window = replace(filters, set=None)
        fast = _sets_up_to_now(conn, window)  # a window up to now: rows a set, not a day
        counts = fast if fast is not None else _counts(conn, window)
        if prefix:
            counts = {d: r for d, r in counts.items() if d.startswith(prefix.lower())}
        if filters.set is not None:
            counts = {d: r for d, r in counts.items() if d == filters.set}
        known = {}
        if counts:
            facts = select(S.digest, S.name, S.capability, S.version)
            known = {
                d: tuple(rest)
                for d, *rest in conn.execute(facts.where(S.digest.in_(list(counts)))).all()
            }
    rows = []
    for digest, base in counts.items():
        name, cap, version = known.get(digest, (None, None, None))
        row = {
            "set": digest,
            "name": name,
            "capability": cap,
            "version": version,
            "reports": base["reports"],
            "no_path": base["no_path"],
            "sinks": len(base["sinks"]),
            "last_seen_ms": base["last_seen_ms"],
        }
        _rate(row)
        rows.append(row)
    sort = sort if sort in SET_SORTS else "reports"
    return _page(rows, sort, desc, "set", limit, after)


def _rank(rgbs: Any) -> Any:
    """A group's place in the exact tier's order: its distinct RGB digests when they disagree
    (two or more, the most first), 0 otherwise (then by set and symbols digest)."""
    return case((rgbs > 1, rgbs), else_=0)


def _grouped_exact(rows: Any, *, disagree: bool) -> Any:
    """:func:`exact_groups`' columns over ``rows`` (a subquery of ``set_digest,
    symbols_digest, rgb_digest, sink, request_digest`` (``""``: none), ``n``, ``last_ms``):
    one row a group, ``total`` beside."""
    c = rows.c
    rgb = func.nullif(c.rgb_digest, "")
    rgbs = func.count(distinct(rgb))
    return (
        select(
            c.set_digest.label("set"),
            c.symbols_digest.label("symbols_digest"),
            cast(func.sum(c.n), BigInteger).label("decodes"),
            rgbs.label("rgb_digests"),
            func.min(rgb).label("rgb_least"),
            func.max(rgb).label("rgb_greatest"),
            cast(func.sum(case((c.rgb_digest == "", c.n), else_=0)), BigInteger).label(
                "rgb_unknown"
            ),
            func.count(distinct(func.nullif(c.request_digest, ""))).label("payloads"),
            func.count(distinct(c.sink)).label("sinks"),
            func.max(c.last_ms).label("last_seen_ms"),
            _rank(rgbs).label("rank"),
            func.count().over().label("total"),
        )
        .group_by(c.set_digest, c.symbols_digest)
        .having(*([rgbs > 1] if disagree else []))
    )


#: The filters the exact tier table of some sinks reads from their rows (:func:`sink_groups`).
_EXACT_SINKS = {"sink", "sinks", "since_ms", "until_ms", "set", "tier", "outcome"}


def sink_groups(conn: Connection, filters: Filters, *, disagree: bool = False) -> Any | None:
    """:func:`exact_groups`' statement for a sink (or a class's sinks) from that sink's rows
    only: the window's whole days from ``exact_days`` as it stands with the inbox
    (``ix_exact_days_sink``, rollups.current), its partial days from the sink's reports
    (``ix_reports_sink_created``); its cost grows with that sink's decodes, not the fleet's.
    ``None`` when the filters are not only sinks, a set and the window, or the window starts
    before the roll-ups' horizon."""
    asked = {k for k, v in vars(filters).items() if v is not None}
    if asked - _EXACT_SINKS or not asked & {"sink", "sinks"}:
        return None
    since, until = filters.since_ms, filters.until_ms
    horizon = horizon_of(conn)
    if horizon and (since is None or since < horizon):
        return None
    edges, days = cut(since, until, DAY_MS)
    mine = [] if filters.sink is None else [filters.sink]
    names = mine if filters.sinks is None else [s for s in filters.sinks if s in mine or not mine]
    d = current(conn, EXACT_DAYS).c
    cols = (d.set_digest, d.symbols_digest, d.rgb_digest, d.sink, d.request_digest, d.n, d.last_ms)
    where = [d.sink.in_(names), *([] if filters.set is None else [d.set_digest == filters.set])]
    parts: list[Any] = []
    if days is not None:
        parts.append(select(*cols).where(*where, *within(d.start_ms, [days])))
    if edges:
        raw: list[Any] = [R.sink.in_(names), EXACT]
        raw += [R.set_digest.is_not(None), R.symbols_digest.is_not(None)]
        raw += [] if filters.set is None else [R.set_digest == filters.set]
        parts.append(
            select(
                R.set_digest,
                R.symbols_digest,
                func.coalesce(R.rgb_digest, "").label("rgb_digest"),
                R.sink,
                func.coalesce(R.request_digest, "").label("request_digest"),
                literal(1, BigInteger).label("n"),
                R.created_ms.label("last_ms"),
            ).where(*raw, *within(R.created_ms, edges))
        )
    if not parts or not names:
        parts = [select(*cols).where(false())]
    return _grouped_exact(union_all(*parts).subquery("sink_rows"), disagree=disagree)


def exact_groups(filters: Filters, *, disagree: bool = False) -> Any:
    """The statement of :func:`exact_table`'s groups read from the reports (one row each,
    ``total`` beside), read from ``ix_reports_exact`` alone (tests/service/store/test_exact_table.py
    shows the plan): a window shorter than a day, or filters the roll-ups lack."""
    # ix_reports_exact's own WHERE, as written there: the planners read that index (a partial
    # one) only for a query whose terms imply its own, and bound values do not; a report has a
    # tier only when a path ran (decoded)
    where: list[Any] = [*replace(filters, tier=None, outcome=None).where(), EXACT]
    where += [R.set_digest.is_not(None), R.symbols_digest.is_not(None)]
    rgbs = func.count(distinct(R.rgb_digest))
    return (
        select(
            R.set_digest.label("set"),
            R.symbols_digest.label("symbols_digest"),
            func.count().label("decodes"),
            rgbs.label("rgb_digests"),
            func.min(R.rgb_digest).label("rgb_least"),
            func.max(R.rgb_digest).label("rgb_greatest"),
            (func.count() - func.count(R.rgb_digest)).label("rgb_unknown"),
            func.count(distinct(R.request_digest)).label("payloads"),
            func.count(distinct(R.sink)).label("sinks"),
            func.max(R.created_ms).label("last_seen_ms"),
            _rank(rgbs).label("rank"),
            func.count().over().label("total"),
        )
        .where(*where)
        .group_by(R.set_digest, R.symbols_digest)
        .having(*([rgbs > 1] if disagree else []))
    )


#: The filters the exact tier's roll-ups answer (a tier or an outcome asked is left out, as
#: :func:`exact_groups` leaves it: the view is the exact tier's decodes).
_EXACT_ROLLED = {"since_ms", "until_ms", "set", "tier", "outcome"}
#: Groups whose window is counted one by one (the inbox's, those seen at or after the window's
#: end, those that ever disagreed) at most; beyond, the reports are read.
_SPECIAL_MAX = 2000
Group = tuple[str, str]


def _group_stats(
    conn: Connection, keys: set[Group], days: Range | None, edges: list[Range]
) -> dict[Group, dict[str, Any]]:
    """The window's counts of each group of ``keys`` that had a decode in it: its whole days
    from ``exact_days`` as it stands with the inbox (rollups.current), the partial days at its
    edges from the reports (``ix_reports_exact``; the window starts at the roll-ups' horizon
    or later, :func:`_exact_rolled`, so every report there is one they may count)."""
    if not keys:
        return {}
    sets = sorted({k[0] for k in keys})
    syms = sorted({k[1] for k in keys})
    d = current(conn, EXACT_DAYS).c
    cols = (d.set_digest, d.symbols_digest, d.rgb_digest, d.sink, d.request_digest, d.n, d.last_ms)
    mine = [d.set_digest.in_(sets), d.symbols_digest.in_(syms)]
    parts = [] if days is None else [select(*cols).where(*mine, *within(d.start_ms, [days]))]
    if edges:
        parts.append(
            select(
                R.set_digest,
                R.symbols_digest,
                func.coalesce(R.rgb_digest, ""),
                R.sink,
                func.coalesce(R.request_digest, ""),
                literal(1, BigInteger),
                R.created_ms,
            ).where(
                EXACT,
                *within(R.created_ms, edges),
                R.set_digest.in_(sets),
                R.symbols_digest.in_(syms),
            )
        )
    out: dict[Group, dict[str, Any]] = {}
    for digest, symbols, rgb, sink, payload, n, last in conn.execute(union_all(*parts)):
        key = (str(digest), str(symbols))
        if key not in keys:
            continue
        g = out.setdefault(
            key,
            {
                "decodes": 0,
                "rgb": set(),
                "unknown": 0,
                "payloads": set(),
                "sinks": set(),
                "last": 0,
            },
        )
        g["decodes"] += int(n)
        if rgb:
            g["rgb"].add(rgb)
        else:
            g["unknown"] += int(n)
        if payload:
            g["payloads"].add(payload)
        g["sinks"].add(sink)
        g["last"] = max(g["last"], int(last))
    return out


def _item(key: Group, g: dict[str, Any]) -> dict[str, Any]:
    rgb = sorted(g["rgb"])
    return {
        "set": key[0],
        "symbols_digest": key[1],
        "decodes": g["decodes"],
        "rgb_digests": len(rgb),
        "rgb_least": rgb[0] if rgb else None,
        "rgb_greatest": rgb[-1] if rgb else None,
        "rgb_unknown": g["unknown"],
        "payloads": len(g["payloads"]),
        "sinks": len(g["sinks"]),
        "last_seen_ms": g["last"],
        "rank": len(rgb) if len(rgb) > 1 else 0,
    }


def _groups_in(conn: Connection, since: int | None, until: int | None, digest: str | None) -> int:
    """The groups of ``exact_groups`` (of the set ``digest``; ``None``: every set) whose latest
    decode is in ``[since, until)``: the whole days' from ``exact_group_days`` (a row a set and
    day), the partial days' at the window's edges counted by ``ix_exact_groups_last``."""
    edges, days = cut(since, until, DAY_MS)
    g, d = EXACT_GROUPS.c, GROUP_DAYS.c
    parts: list[Any] = []
    if days is not None:
        mine = [] if digest is None else [d.set_digest == digest]
        parts.append(select(func.sum(d.n)).where(*within(d.start_ms, [days]), *mine))
    for lo, hi in edges:
        mine = [] if digest is None else [g.set_digest == digest]
        parts.append(select(func.count()).where(*between(g.last_ms, lo, hi), *mine))
    return sum(int(conn.execute(part).scalar() or 0) for part in parts)


def _exact_rolled(
    conn: Connection,
    filters: Filters,
    *,
    disagree: bool,
    limit: int,
    after: tuple[int, str, str] | None,
) -> tuple[list[dict[str, Any]], int, bool] | None:
    """:func:`exact_table`'s page (its items, the total, whether more follow) from the exact
    tier's roll-ups, for a window of a day or more, from the roll-ups' horizon on, that filters
    no more than :data:`_EXACT_ROLLED`; ``None`` otherwise, or where the reports answer it
    better.

    The groups of the window are those of ``exact_groups`` whose latest decode is in it (exact
    for a group with none at or after the window's end), less and plus the special groups
    (:func:`_special_groups`: disagreeing ones are flagged at fold time, the least RGB digest
    below the greatest), each counted one by one from ``exact_days`` (:func:`_group_stats`).
    Only a special group can disagree in the window; every other group is walked in the
    listing's order by ``exact_groups``' key (:func:`_agreeing`): a page reads a page of rows."""
    if {k for k, v in vars(filters).items() if v is not None} - _EXACT_ROLLED:
        return None
    since, until = filters.since_ms, filters.until_ms
    edges, days = cut(since, until, DAY_MS)
    horizon = horizon_of(conn)
    # a day or more (an open end: unbounded): a shorter window holds few decodes, read from the
    # reports; from the horizon on, what the roll-ups hold
    short = since is not None and until is not None and until - since < DAY_MS
    if short or (horizon and (since is None or since < horizon)):
        return None
    special = _special_groups(conn, filters.set, until)
    if len(special) > _SPECIAL_MAX:
        return None
    stats = _group_stats(conn, special, days, edges)
    found = {k: _item(k, v) for k, v in stats.items()}
    top = sorted(
        (r for r in found.values() if r["rank"]),
        key=lambda r: (-r["rank"], r["set"], r["symbols_digest"]),
    )
    items = top
    if disagree:
        total, rest = len(top), []
    else:
        total = _groups_total(conn, special, filters) + len(found)
        rest = [r for r in found.values() if not r["rank"]]
    if after is not None:
        rank, digest, symbols = after
        if rank:
            items = [
                r
                for r in items
                if (-r["rank"], r["set"], r["symbols_digest"]) > (-rank, digest, symbols)
            ]
        else:
            items = []
            rest = [r for r in rest if (r["set"], r["symbols_digest"]) > (digest, symbols)]
    if disagree or len(items) > limit:
        return items[: limit + 1], total, len(items) > limit
    want = limit + 1 - len(items)
    items = [*items, *_agreeing(conn, rest, special, filters, after, want, days, edges)]
    return items, total, len(items) > limit


def _groups_total(conn: Connection, special: set[Group], filters: Filters) -> int:
    """The exact tier's groups of the window other than the ``special`` ones (counted one by
    one by :func:`_exact_rolled`): all of them (:func:`_groups_in`), less the special groups'
    rows in range, which were counted as members."""
    g = EXACT_GROUPS.c
    since, until = filters.since_ms, filters.until_ms
    counted = int(_groups_in(conn, since, until, filters.set))
    if not special:
        return counted
    rows = select(g.set_digest, g.symbols_digest).where(
        *between(g.last_ms, since, until),
        *([] if filters.set is None else [g.set_digest == filters.set]),
        g.set_digest.in_(sorted({k[0] for k in special})),
        g.symbols_digest.in_(sorted({k[1] for k in special})),
    )
    return counted - sum((str(a), str(b)) in special for a, b in conn.execute(rows))


def _special_groups(conn: Connection, set_digest: str | None, until: int | None) -> set[Group]:
    """The exact tier's groups :func:`_exact_rolled` counts one by one (at most
    :data:`_SPECIAL_MAX` and one more): those seen at or after the window's end ``until``,
    those whose decodes ever disagreed, and those with reports in the inbox."""
    g = EXACT_GROUPS.c
    mine = [] if set_digest is None else [g.set_digest == set_digest]
    special: set[Group] = set()
    if until is not None:
        late = select(g.set_digest, g.symbols_digest).where(g.last_ms >= until, *mine)
        special |= {(str(a), str(b)) for a, b in conn.execute(late.limit(_SPECIAL_MAX + 1))}
    disagreeing = select(g.set_digest, g.symbols_digest).where(DISAGREE, *mine)
    special |= {(str(a), str(b)) for a, b in conn.execute(disagreeing.limit(_SPECIAL_MAX + 1))}
    p = pending(conn, EXACT_GROUPS).subquery()
    inbox = select(p.c.set_digest, p.c.symbols_digest)
    inbox = inbox.where(*([] if set_digest is None else [p.c.set_digest == set_digest]))
    return special | {(str(a), str(b)) for a, b in conn.execute(inbox.limit(_SPECIAL_MAX + 1))}


def _agreeing(
    conn: Connection,
    rest: list[dict[str, Any]],
    special: set[Group],
    filters: Filters,
    after: tuple[int, str, str] | None,
    want: int,
    days: Any,
    edges: Any,
) -> list[dict[str, Any]]:
    """The next ``want`` groups of :func:`_exact_rolled`'s window that agree, in key order, each
    with its counts: ``rest`` (the special ones that agree) merged with those walked by
    ``exact_groups``' key (``last_ms + 0``: not by its index of the latest time, which would
    sort every group of the window), from the cursor ``after`` on."""
    g = EXACT_GROUPS.c
    since, until = filters.since_ms, filters.until_ms
    mine = [] if filters.set is None else [g.set_digest == filters.set]
    walk = select(g.set_digest, g.symbols_digest).where(
        *between(g.last_ms + 0, since, until), *mine
    )
    if after is not None and not after[0]:
        digest, symbols = after[1], after[2]
        walk = walk.where(
            or_(g.set_digest > digest, and_(g.set_digest == digest, g.symbols_digest > symbols))
        )
    walk = walk.order_by(g.set_digest, g.symbols_digest).limit(want + len(special))
    keys = [(str(a), str(b)) for a, b in conn.execute(walk)]
    keys = [k for k in keys if k not in special]
    rest = sorted(
        [*rest, *({"set": a, "symbols_digest": b} for a, b in keys)],
        key=lambda r: (r["set"], r["symbols_digest"]),
    )[:want]
    needed = {(r["set"], r["symbols_digest"]) for r in rest if "decodes" not in r}
    more = _group_stats(conn, needed, days, edges)
    rest = [
        r
        if "decodes" in r
        else _item((r["set"], r["symbols_digest"]), more[(r["set"], r["symbols_digest"])])
        for r in rest
    ]
    return rest


def exact_table(
    store: ReportStore,
    filters: Filters,
    *,
    disagree: bool = False,
    limit: int = 50,
    after: str | None = None,
) -> dict[str, Any]:
    """One row per (set, symbols digest) of the window's decodes at the exact tier (a path ran
    at ``decode-equivalence``): its decodes (one report a decode ran), its distinct RGB digests
    (their count, the least and the greatest), the decodes whose RGB is not known (a sink's
    report states none), its payloads (distinct request digests, the service's decodes), sinks
    and last seen. The symbols digest is what the payload gives through the integer entropy
    stage, so one row's decodes are one payload's: ``agree`` is at most one RGB digest
    (``decode-equivalence``'s promise). Disagreeing rows first (the most RGB digests first),
    then by set and symbols digest; ``disagree``: only those. Paged by keyset. A window of a
    day or more is read from the exact tier's roll-ups (:func:`_exact_rolled`), a sink's (or a
    class's) from that sink's rows (:func:`sink_groups`), any other from the reports, grouped,
    counted and paged in SQL (:func:`exact_groups`)."""
    cursor = None
    if after is not None:
        n, digest, symbols = keyset.decode("exact", after, [keyset.INT, keyset.STR, keyset.STR])
        cursor = (n if isinstance(n, int) else 0, str(digest), str(symbols))  # an int (INT)
    with store.engine.connect() as conn:
        rolled = _exact_rolled(conn, filters, disagree=disagree, limit=limit, after=cursor)
        if rolled is not None:
            found, total, _ = rolled
        else:
            grouped_ = sink_groups(conn, filters, disagree=disagree)
            if grouped_ is None:
                grouped_ = exact_groups(filters, disagree=disagree)
            found, total = _exact_raw(conn, grouped_, limit=limit, after=cursor)
        versions = set_versions(conn, (r["set"] for r in found[:limit]))
    items = [
        {
            **{k: v for k, v in r.items() if k not in ("total", "rank")},
            "set_version": versions.get(r["set"]),
            "agree": r["rgb_digests"] <= 1,
        }
        for r in found[:limit]
    ]
    last = found[limit - 1] if len(found) > limit else None
    return {
        "total": int(total),
        "limit": limit,
        "items": items,
        "next": None
        if last is None
        else keyset.encode("exact", [last["rank"], last["set"], last["symbols_digest"]]),
    }


def _exact_raw(
    conn: Connection,
    groups: Any,
    *,
    limit: int,
    after: tuple[int, str, str] | None,
) -> tuple[list[dict[str, Any]], int]:
    """:func:`exact_table`'s page (up to ``limit + 1`` groups) and total of ``groups`` (the
    statement of :func:`exact_groups` or :func:`sink_groups`), in the listing's order."""
    grouped_ = groups.subquery()
    g = grouped_.c
    pg = conn.dialect.name == "postgresql"
    dset, dsym = (
        (g.set.collate("C"), g.symbols_digest.collate("C")) if pg else (g.set, g.symbols_digest)
    )
    page = select(grouped_).order_by(g.rank.desc(), dset, dsym)
    if after is not None:
        n, digest, symbols = after
        page = page.where(
            or_(
                g.rank < n,
                and_(g.rank == n, or_(dset > digest, and_(dset == digest, dsym > symbols))),
            )
        )
    found = [dict(r) for r in conn.execute(page.limit(limit + 1)).mappings().all()]
    total = found[0]["total"] if found else None
    if total is None:  # past the last row: counted without the page
        total = conn.execute(select(func.count()).select_from(grouped_)).scalar_one()
    return found, int(total)
