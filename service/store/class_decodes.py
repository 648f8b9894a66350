"""Decodes per sink class: for a window, per class of the policy in force, the decodes its sinks'
reports record and how many of them no path ran; the sinks no class names together as
*unclassified* (``None``), so every decode of the window is counted once, in one class.

A decode is counted by its first report (``role = 'primary'``, :data:`rollups.DECODES`): a
service decode has one report, or two when its fallback was tried, and each decode of a run
report one; so a decode counts once however many reports it has. A decode ran a path when one
of its reports did (a fallback is tried only when no path ran the primary, so at most one
does): its decoded reports. Counted in SQL from ``sink_days`` and ``sink_hours`` for the
window's whole days and hours, as they stand with the reports the aggregator has not folded in
yet (:func:`rollups.current`), and from the reports for its partial hours (exact for any window
and at any instant), each sink put in its class by a ``CASE`` over the policy's sinks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import BigInteger, Connection, case, cast, func, literal, select, union_all

from wai_dispatch.service.store.rollups import (
    DAY_MS,
    DECODES,
    SINK_DAYS,
    SINK_HOURS,
    R,
    Range,
    current,
    cut,
    within,
)

__all__ = ["decodes_by_class"]


def decodes_by_class(
    conn: Connection,
    classes: Mapping[str, str],
    *,
    since_ms: int | None,
    until_ms: int | None,
    sink_class: str | None = None,
    sink: str | None = None,
) -> dict[str | None, tuple[int, int]]:
    """Per class (``classes``: the policy's ``sink → class``; ``None``: a sink it names in no
    class), the decodes of ``[since_ms, until_ms)`` and, of them, those no path ran. Only the
    classes with a decode are keys. ``sink_class``, ``sink``: only that class's sinks, that
    sink."""
    raw, hours = cut(since_ms, until_ms)
    days: Range | None = None
    edges: list[Range] = []
    if hours is not None:
        edges, days = cut(*hours, DAY_MS)
    members: dict[str, list[str]] = {}
    for name, cls in sorted(classes.items()):
        members.setdefault(cls, []).append(name)
    if sink_class:
        chosen = members.get(sink_class, [])
        if not chosen:
            return {}
    parts: list[Any] = []

    def where(c: Any, time: Any, ranges: list[Range]) -> list[Any]:
        out = within(time, ranges)
        out += [] if sink is None else [c.sink == sink]
        out += [c.sink.in_(chosen)] if sink_class else []
        return out

    for table, ranges in ((SINK_DAYS, [days] if days is not None else []), (SINK_HOURS, edges)):
        if ranges:
            c = current(conn, table).c  # a key may have a row of each: summed per sink below
            parts.append(
                select(c.sink, c.decodes, c.n - c.no_path).where(*where(c, c.start_ms, ranges))
            )
    if raw:
        decodes = func.sum(case((DECODES, 1), else_=0))
        decoded = func.sum(case((R.outcome == "decoded", 1), else_=0))
        ran = select(R.sink, decodes, decoded).where(*where(R, R.created_ms, raw))
        parts.append(ran.group_by(R.sink))
    if not parts:
        return {}
    u = list(union_all(*parts).subquery().c)
    # per sink first (a row a sink), then each sink's class: the CASE runs once a sink
    per_sink = select(u[0].label("sink"), func.sum(u[1]).label("n"), func.sum(u[2]).label("ran"))
    cols = list(per_sink.group_by(u[0]).subquery().c)
    named = [(cols[0].in_(sinks), literal(cls)) for cls, sinks in sorted(members.items())]
    cls_of = case(*named, else_=literal("")) if named else literal("")
    each = select(cls_of.label("cls"), cols[1].label("n"), cols[2].label("ran")).subquery()
    e = each.c
    sums = (cast(func.sum(e.n), BigInteger), cast(func.sum(e.ran), BigInteger))
    out: dict[str | None, tuple[int, int]] = {}
    for cls, n, ran in conn.execute(select(e.cls, *sums).group_by(e.cls)):
        if n:
            out[cls or None] = (int(n), int(n) - int(ran or 0))
    return out
