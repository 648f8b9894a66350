"""The sets table's counts for a window that reaches now, from rows that do not grow with the
sinks or the days: a set's reports and no-path reports from the fleet's per-hour roll-ups
(``report_rollups``: a few rows an hour, whatever the fleet) and the reports of the window's
partial hours, its sinks and last-seen time from ``sink_sets`` (one row a sink and set: its
latest report's time, service/store/activity.py).

Exact when every pair's latest report is before the window's end (the window reaches now, as
the dashboard's do): then a sink used a set in the window exactly when that pair's latest
report is at or after the window's start, and the set's latest report of the window is its
pairs' latest. :func:`counts` answers ``None`` otherwise, or for filters beyond the window
(service/store/fleet.py reads the per-sink activity then)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, func, or_, select

from wai_dispatch.service.store.activity import PAIRS
from wai_dispatch.service.store.reports import Filters, R, split
from wai_dispatch.service.store.rollups import FLEET, HOUR_MS

__all__ = ["counts"]


def counts(conn: Connection, filters: Filters) -> dict[str, dict[str, Any]] | None:
    """Per set digest of the window: reports, no-path reports, last seen and its sinks; or
    ``None`` when the window or the filters are not what this reads exactly."""
    asked = {k for k, v in vars(filters).items() if v is not None}
    if not asked <= {"since_ms", "until_ms"}:
        return None
    lo, hi = filters.since_ms, filters.until_ms
    p = PAIRS.c
    if hi is not None:
        latest = conn.execute(select(func.max(p.last_ms))).scalar()
        if latest is not None and int(latest) >= hi:
            return None  # a pair's latest report is at or after the end: not exact here
    out: dict[str, dict[str, Any]] = {}

    def row(digest: str) -> dict[str, Any]:
        return out.setdefault(digest, {"reports": 0, "no_path": 0, "last_seen_ms": None,
                                       "sinks": set()})  # fmt: skip

    raw, hours = split(filters, HOUR_MS)
    if hours is not None:
        c = FLEET.c
        where = [*([] if hours[0] is None else [c.hour_ms >= hours[0]]),
                 *([] if hours[1] is None else [c.hour_ms < hours[1]])]  # fmt: skip
        for digest, outcome, n in conn.execute(
            select(c.set_digest, c.outcome, func.sum(c.n))
            .where(*where).group_by(c.set_digest, c.outcome)
        ):  # fmt: skip
            if digest:
                r = row(digest)
                r["reports"] += int(n)
                r["no_path"] += int(n) if outcome == "refused" else 0
    spans = [and_(*([] if a is None else [R.created_ms >= a]),
                  *([] if b is None else [R.created_ms < b])) for a, b in raw]  # fmt: skip
    if spans:
        for digest, outcome, n in conn.execute(
            select(R.set_digest, R.outcome, func.count())
            .where(or_(*spans)).group_by(R.set_digest, R.outcome)
        ):  # fmt: skip
            if digest:
                r = row(digest)
                r["reports"] += int(n)
                r["no_path"] += int(n) if outcome == "refused" else 0
    pairs = select(p.set_digest, p.sink, p.last_ms)
    if lo is not None:
        pairs = pairs.where(p.last_ms >= lo)
    for digest, sink, last in conn.execute(pairs):
        if digest and digest in out:
            r = out[digest]
            r["sinks"].add(sink)
            if r["last_seen_ms"] is None or last > r["last_seen_ms"]:
                r["last_seen_ms"] = int(last)
    return out
