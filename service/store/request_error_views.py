"""Reading the request errors (written by service/store/request_errors.py): the counts of a
window by code, route and sink from the per-hour roll-ups (a window's first and last hours
counted whole: the answer names the hours it counted), the rows kept and dropped, and the
latest rows, paged by keyset (``after``: newest first, by time and sequence); per sink for the
fleet table; and pruning, with the reports."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Select, cast, delete, func, select
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.service.store import keyset
from wai_dispatch.service.store.models import (
    RequestErrorRollupRow,
    RequestErrorRow,
    RequestErrorSampleRow,
)
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.request_errors import ANONYMOUS
from wai_dispatch.service.store.rollups import HOUR_MS, between, hour_of

__all__ = ["errors_by_sink", "list_errors", "prune_errors"]

E = RequestErrorRow.__table__.c
U = RequestErrorRollupRow.__table__.c
S = RequestErrorSampleRow.__table__.c
TAG = "e"
_HIDDEN = ("created_ms", "seq")


def _hours(c: Any, since_ms: int | None, until_ms: int | None) -> list[ColumnElement[bool]]:
    """The roll-up rows of every hour the window ``[since_ms, until_ms)`` touches."""
    return between(c.hour_ms, None if since_ms is None else hour_of(since_ms), until_ms)


def list_errors(
    store: ReportStore,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    sinks: tuple[str, ...] | None = None,
    code: str | None = None,
    limit: int = 50,
    after: str | None = None,
) -> dict[str, Any]:
    """The errors of a window: their ``total``, counts ``by_code`` (with the status),
    ``by_route`` and ``by_sink`` (``null``: no sink's token), every one counted; the rows kept
    and dropped (a sink's errors past the cap of its hour); and a page of the rows kept, newest
    first, ``next`` the cursor of the following page."""
    where, rows_where, samples = _filters(since_ms, until_ms, sinks, code)
    page = list(rows_where)
    if after is not None:
        ms, seq = keyset.decode(TAG, after, [keyset.INT, keyset.INT])
        page.append((E.created_ms < ms) | ((E.created_ms == ms) & (E.seq < seq)))
    sums = select(func.coalesce(func.sum(S.seen), 0), func.coalesce(func.sum(S.kept), 0))
    cols = (E.seq, E.created_ms, E.status, E.code, E.sink, E.request_id, E.method, E.path, E.route)
    newest = select(*cols).where(*page).order_by(E.created_ms.desc(), E.seq.desc())
    with store.engine.connect() as conn:
        tallies = _tallies(conn, where)
        seen, kept = conn.execute(sums.where(*samples)).one()
        found = conn.execute(newest.limit(limit + 1)).mappings().all()
    more = len(found) > limit
    shown = found[:limit]
    first = None if since_ms is None else hour_of(since_ms)
    last = None if until_ms is None else hour_of(until_ms - 1) + HOUR_MS
    return {
        **tallies,
        "counted": {"since_ms": first, "until_ms": last},  # whole hours
        "rows": {"kept": int(kept), "dropped": int(seen) - int(kept)},
        "items": [
            {"time_ms": r["created_ms"], **{k: v for k, v in r.items() if k not in _HIDDEN}}
            for r in shown
        ],
        "limit": limit,
        "next": (
            keyset.encode(TAG, [shown[-1]["created_ms"], shown[-1]["seq"]])
            if more and shown
            else None
        ),
    }


def _filters(
    since_ms: int | None, until_ms: int | None, sinks: tuple[str, ...] | None, code: str | None
) -> tuple[list[ColumnElement[bool]], list[ColumnElement[bool]], list[ColumnElement[bool]]]:
    """A window's filters on the hourly roll-ups, on the rows kept and on the samples' counts
    (which hold no code)."""
    where = _hours(U, since_ms, until_ms)
    rows_where = between(E.created_ms, since_ms, until_ms)
    samples = _hours(S, since_ms, until_ms)
    if sinks is not None:
        where.append(U.sink.in_(sinks))
        rows_where.append(E.sink.in_(sinks))
        samples.append(S.sink.in_(sinks))
    if code is not None:
        where.append(U.code == code)
        rows_where.append(E.code == code)
    return where, rows_where, samples


def _tallies(conn: Any, where: list[ColumnElement[bool]]) -> dict[str, Any]:
    """Every error of the roll-ups ``where`` selects: the ``total``, and the counts
    ``by_code`` (with the status), ``by_sink`` and ``by_route``, most first."""
    n = func.sum(U.n).label("n")
    by_code = conn.execute(
        select(U.code, U.status, n).where(*where).group_by(U.code, U.status)
    ).all()
    by_sink = conn.execute(select(U.sink, n).where(*where).group_by(U.sink)).all()
    by_route = conn.execute(select(U.route, n).where(*where).group_by(U.route)).all()
    return {
        "total": sum(int(k) for _, _, k in by_code),
        "by_code": sorted(
            ({"code": c, "status": s, "count": int(k)} for c, s, k in by_code),
            key=lambda r: (-r["count"], r["code"], r["status"]),
        ),
        "by_sink": sorted(
            ({"sink": None if s == ANONYMOUS else s, "count": int(k)} for s, k in by_sink),
            key=lambda r: (-r["count"], r["sink"] or ""),
        ),
        "by_route": sorted(
            ({"route": r, "count": int(k)} for r, k in by_route),
            key=lambda r: (-r["count"], r["route"]),
        ),
    }


def errors_by_sink(since_ms: int | None, until_ms: int | None) -> Select[Any]:
    """``(sink, n, last)``: per sink, its errors in the window (its hours counted whole) and the
    time of its latest."""
    return (
        select(
            U.sink.label("sink"),
            cast(func.sum(U.n), BigInteger).label("n"),
            func.max(U.last_ms).label("last"),
        )
        .where(U.sink != ANONYMOUS, *_hours(U, since_ms, until_ms))
        .group_by(U.sink)
    )


def prune_errors(store: ReportStore, before_ms: int) -> int:
    """Delete the error rows noted before ``before_ms`` and the roll-ups of the hours before
    it; returns how many rows went."""
    with store.engine.begin() as conn:
        gone = conn.execute(delete(RequestErrorRow).where(E.created_ms < before_ms))
        conn.execute(delete(RequestErrorRollupRow).where(U.hour_ms < hour_of(before_ms)))
        conn.execute(delete(RequestErrorSampleRow).where(S.hour_ms < hour_of(before_ms)))
    return int(gone.rowcount or 0)
