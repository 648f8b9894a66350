"""The dashboard's per-sink and per-set tables: for each sink (or set) of a window, its reports,
the reports where no path ran and their share, its request errors, its run reports' verdicts
and when it was last seen; sorted, with the total of rows and one page of them (keyset:
``after`` the cursor ``next``).

Report counts come from the per-sink activity roll-ups (service/store/rollups.py: whole days,
whole hours, and the reports for the window's partial hours) when the filters are only sinks,
a set and the window; from the per-hour roll-ups and the reports for the edges otherwise (the
split of service/store/reports.py's summary, so they agree with it); a filter the roll-ups
cannot answer (a refusal code, a request id) reads the reports only. The sets table of a
window that reaches now reads rows a set, not a sink and day (:func:`_sets_up_to_now`).
The last-seen time is the latest report of the window (an hour's start, from the per-hour
roll-ups, when its reports were pruned), request error or run report (run reports counted
from their roll-ups). Every sink the policy in force names is a
row, seen or not, so a sink that went quiet shows; a sink no class names is ``class: null``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, case, func, select

from wai_dispatch.service.store import keyset
from wai_dispatch.service.store.models import SetRow
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters, R, rollup_where, split
from wai_dispatch.service.store.request_error_views import errors_by_sink
from wai_dispatch.service.store.rollups import (
    DAY_MS,
    DAYS,
    FLEET,
    HOUR_MS,
    HOURS,
    PAIRS,
    SINK,
    Range,
    between,
    cut,
    run_counts,
    within,
)

__all__ = ["SET_SORTS", "SINK_SORTS", "set_table", "sink_table"]

S = SetRow.__table__.c
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


def _activity(conn: Connection, filters: Filters, key: str) -> dict[str, dict[str, Any]]:
    """:func:`_counts` from the activity roll-ups: whole days, whole hours, the edges' reports;
    the last-seen time exact (each roll-up keeps its latest report's)."""
    out: dict[str, dict[str, Any]] = {}
    raw, hours, days = _spans(filters.since_ms, filters.until_ms)

    def take(rows: Any) -> None:
        for k, sink, n, no_path, last in rows:
            if not k:
                continue
            row = out.setdefault(k, _blank())
            row["reports"] += int(n)
            row["no_path"] += int(no_path or 0)
            row["sinks"].add(sink)
            _seen(row, last)

    parts = [(DAYS.c, [days])] if days is not None else []
    parts += [(HOURS.c, hours)] if hours else []
    for c, ranges in parts:
        col = c.sink if key == "sink" else c.set_digest
        where = within(c.start_ms, ranges)
        if filters.sink is not None:
            where.append(c.sink == filters.sink)
        if filters.sinks is not None:
            where.append(c.sink.in_(filters.sinks))
        if filters.set is not None:
            where.append(c.set_digest == filters.set)
        take(
            conn.execute(  # by sink first: SQLite walks ix_*_sink_start
                select(col, c.sink, func.sum(c.n), func.sum(c.no_path), func.max(c.last_ms))
                .where(*where)
                .group_by(c.sink, col)
            ).all()
        )
    if raw:
        where = replace(filters, since_ms=None, until_ms=None).where() + within(R.created_ms, raw)
        by = R.sink if key == "sink" else R.set_digest
        refused = func.sum(case((R.outcome == "refused", 1), else_=0))
        take(
            conn.execute(
                select(by, R.sink, func.count(), refused, func.max(R.created_ms))
                .where(*where)
                .group_by(by, R.sink)
            ).all()
        )
    return out


def _add(out: dict[str, dict[str, Any]], rows: Sequence[Any]) -> None:
    """Fold ``(key, sink, outcome, reports, last seen)`` rows into ``out``."""
    for k, sink, outcome, n, last in rows:
        if not k:
            continue
        row = out.setdefault(k, _blank())
        row["reports"] += int(n)
        row["no_path"] += int(n) if outcome == "refused" else 0
        row["sinks"].add(sink)
        _seen(row, last)


def _counts(conn: Connection, filters: Filters, key: str) -> dict[str, dict[str, Any]]:
    """Per ``key`` (``sink`` or ``set``): reports, no-path reports, last seen, sinks."""
    asked = {k for k, v in vars(filters).items() if v is not None}
    if asked <= _ACTIVITY and "" not in (filters.set, filters.sink):
        return _activity(conn, filters, key)
    out: dict[str, dict[str, Any]] = {}
    raw, hours = split(filters, HOUR_MS)
    if filters.reason is not None:
        raw, hours = [(filters.since_ms, filters.until_ms)], None
    if hours is not None:
        c = SINK.c  # per sink, so a set's distinct sinks are counted too
        col = c.sink if key == "sink" else c.set_digest
        rows = conn.execute(
            select(col, c.sink, c.outcome, func.sum(c.n), func.max(c.hour_ms))
            .where(*rollup_where(c, filters, hours))
            .group_by(col, c.sink, c.outcome)
        ).all()
        _add(out, rows)
    if raw:
        where = replace(filters, since_ms=None, until_ms=None).where() + within(R.created_ms, raw)
        by = R.sink if key == "sink" else R.set_digest
        rows = conn.execute(
            select(by, R.sink, R.outcome, func.count(), func.max(R.created_ms))
            .where(*where)
            .group_by(by, R.sink, R.outcome)
        ).all()
        _add(out, rows)
    # the exact time of the latest report still stored (the roll-ups keep an hour's start)
    if hours is not None and out:
        of = R.sink if key == "sink" else R.set_digest
        latest = conn.execute(
            select(of, func.max(R.created_ms))
            .where(*filters.where(), of.in_(list(out)))
            .group_by(of)
        ).all()
        for k, last in latest:
            if last is not None:
                out[k]["last_seen_ms"] = int(last)
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
    p = PAIRS.c
    if filters.until_ms is not None:
        latest = conn.execute(select(func.max(p.last_ms))).scalar()
        if latest is not None and int(latest) >= filters.until_ms:
            return None  # a pair's latest report is at or after the end: not exact here
    out: dict[str, dict[str, Any]] = {}
    raw, hours = split(filters, HOUR_MS)
    c = FLEET.c
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


def sink_table(
    store: ReportStore,
    filters: Filters,
    *,
    classes: dict[str, str],
    sort: str = "sink",
    desc: bool = False,
    search: str | None = None,
    limit: int = 50,
    after: str | None = None,
) -> dict[str, Any]:
    """One row per sink of the window (and per sink ``classes``, the policy's ``sink →
    class``, names): reports, no-path reports and rate, request errors (and the latest),
    run reports accepted and refused, class, last seen. ``search``: sinks whose name holds it."""
    with store.engine.connect() as conn:
        counts = _counts(conn, filters, "sink")
        errors = errors_by_sink(conn, filters.since_ms, filters.until_ms)
        by_sink = run_counts(conn, "sink", since_ms=filters.since_ms, until_ms=filters.until_ms)
        runs = [(str(k), ok, n, last) for (k, ok), (n, last) in by_sink.items()]
    keep: Callable[[str], bool] = lambda s: True  # noqa: E731
    if filters.sink is not None:
        keep = lambda s: s == filters.sink  # noqa: E731
    elif filters.sinks is not None:
        chosen = set(filters.sinks)
        keep = lambda s: s in chosen  # noqa: E731
    names = {*counts, *errors, *(r[0] for r in runs), *classes}
    rows: dict[str, dict[str, Any]] = {}
    for name in sorted(n for n in names if keep(n)):
        if search and search.lower() not in name.lower():
            continue
        base = counts.get(name, _blank())
        row = {
            "sink": name,
            "class": classes.get(name),
            "reports": base["reports"],
            "no_path": base["no_path"],
            "last_seen_ms": base["last_seen_ms"],
            "request_errors": 0,
            "runs_accepted": 0,
            "runs_refused": 0,
        }
        n_err, last_err = errors.get(name, (0, None))
        row["request_errors"] = n_err
        _seen(row, last_err)
        _rate(row)
        rows[name] = row
    for sink, accepted, n, last in runs:
        if sink in rows:
            rows[sink]["runs_accepted" if accepted else "runs_refused"] += int(n)
            _seen(rows[sink], last)
    sort = sort if sort in SINK_SORTS else "sink"
    return _page(list(rows.values()), sort, desc, "sink", limit, after)


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
    no-path reports and rate, sinks using it, last seen, and its name and capability when the
    set registry has it. ``prefix``: digests that start with it (any case)."""
    with store.engine.connect() as conn:
        window = replace(filters, set=None)
        fast = _sets_up_to_now(conn, window)  # a window up to now: rows a set, not a day
        counts = fast if fast is not None else _counts(conn, window, "set")
        if prefix:
            counts = {d: r for d, r in counts.items() if d.startswith(prefix.lower())}
        if filters.set is not None:
            counts = {d: r for d, r in counts.items() if d == filters.set}
        known = {}
        if counts:
            known = {
                d: (name, cap)
                for d, name, cap in conn.execute(
                    select(S.digest, S.name, S.capability).where(S.digest.in_(list(counts)))
                ).all()
            }
    rows = []
    for digest, base in counts.items():
        name, cap = known.get(digest, (None, None))
        row = {
            "set": digest,
            "name": name,
            "capability": cap,
            "reports": base["reports"],
            "no_path": base["no_path"],
            "sinks": len(base["sinks"]),
            "last_seen_ms": base["last_seen_ms"],
        }
        _rate(row)
        rows.append(row)
    sort = sort if sort in SET_SORTS else "reports"
    return _page(rows, sort, desc, "set", limit, after)
