"""``GET /v1/reports`` (filters, cursor paging), ``/v1/reports/summary`` and
``/v1/reports/{id}``. An operator sees every sink's reports; a sink only its own."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.concurrency import run_in_threadpool

from wai_dispatch.codec.envelope import DIGEST_PATTERN
from wai_dispatch.dispatch import tokens
from wai_dispatch.dispatch.offer import parse_offer
from wai_dispatch.service.http.deps import PoliciesDep, ReportStoreDep, require
from wai_dispatch.service.store.bearer import Principal, Role
from wai_dispatch.service.store.policies import sinks_of_class
from wai_dispatch.service.store.reports import Filters, get_report, list_reports, summary

router = APIRouter(tags=["reports"])

Text = Annotated[str | None, Query(max_length=256)]
Millis = Annotated[int | None, Query(ge=0, le=2**53, description="Unix time, milliseconds")]


def filters(
    policies: PoliciesDep,
    principal: Annotated[Principal, Depends(require(Role.sink))],
    capability: Text = None,
    path: Annotated[
        str | None, Query(max_length=64, description="unit/backend/arithmetic that ran, or none")
    ] = None,
    reason: Annotated[str | None, Query(max_length=64, description="a refusal code")] = None,
    tier: Text = None,
    sink: Text = None,
    set: Annotated[str | None, Query(pattern=DIGEST_PATTERN, description="set digest")] = None,
    outcome: Annotated[str | None, Query(pattern="^(decoded|refused)$")] = None,
    request_id: Annotated[str | None, Query(max_length=36)] = None,
    since_ms: Millis = None,
    until_ms: Millis = None,
    sink_class: Annotated[
        str | None, Query(max_length=64, description="the sinks of this class in the policy")
    ] = None,
    run_report: Annotated[
        str | None, Query(max_length=128, description="the decodes of this run report")
    ] = None,
) -> Filters:
    """The query's filters; a sink's own name replaces any ``sink`` it asks for. A path, refusal
    code or tier the vocabulary cannot hold, or a set that is no digest, is refused (422), not
    answered with an empty list."""
    if path is not None and path != "none":
        parse_offer([path])
    if reason is not None:
        tokens.parse(tokens.Code, reason, where="reason")
    if tier is not None:
        tokens.parse(tokens.Tier, tier, where="tier")
    if principal.role is Role.sink:
        sink = principal.name
    sinks = None
    if sink_class:
        sinks = sinks_of_class(policies, sink_class)
    return Filters(
        capability,
        path,
        reason,
        tier,
        sink,
        set,
        outcome,
        request_id,
        since_ms,
        until_ms,
        sinks,
        run_report,
    )


@router.get("/v1/reports", summary="Reports, newest first")
async def reports(
    store: ReportStoreDep,
    chosen: Annotated[Filters, Depends(filters)],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
    total: Annotated[bool, Query(description="also count every report selected")] = False,
) -> dict[str, Any]:
    return await run_in_threadpool(
        lambda: list_reports(store, chosen, limit=limit, cursor=cursor, with_total=total)
    )


@router.get("/v1/reports/summary", summary="Counts for the dashboard, computed in the database")
async def reports_summary(
    store: ReportStoreDep,
    chosen: Annotated[Filters, Depends(filters)],
    bucket_s: Annotated[int, Query(ge=1, le=31 * 86400)] = 3600,
) -> dict[str, Any]:
    return await run_in_threadpool(summary, store, chosen, bucket_s=bucket_s)


@router.get("/v1/reports/{report_id}", summary="One report")
async def report(
    store: ReportStoreDep,
    report_id: Annotated[str, Path(max_length=64)],
    principal: Annotated[Principal, Depends(require(Role.sink))],
) -> dict[str, Any]:
    own = principal.name if principal.role is Role.sink else None
    return await run_in_threadpool(get_report, store, report_id, own)
