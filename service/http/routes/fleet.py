"""The operator's fleet tables over HTTP (the dashboard's panels): ``GET /v1/fleet/sinks`` (every
known sink: reports, no-path rate, request errors, run report verdicts, last seen; sorted either
way, "decoded nothing" on its own), ``GET
/v1/fleet/sets`` (per set, by full digest or a prefix of it), ``GET /v1/fleet/exact`` (the exact
tier's decodes per set and symbols digest, a disagreement of RGB digests flagged) and ``GET
/v1/request-errors``
(4xx answers by code, route and sink, and a page of them). Every list says its ``total`` and is
paged by keyset: ``limit``, and ``after`` the cursor a page's ``next`` gave. Operators only."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool

from wai_dispatch.dispatch.errors import UnknownToken, is_code
from wai_dispatch.service.governance import PolicyNotSet
from wai_dispatch.service.http.deps import PoliciesDep, ReportStoreDep, require
from wai_dispatch.service.http.routes.reports import filters
from wai_dispatch.service.store.bearer import Principal, Role
from wai_dispatch.service.store.fleet import (
    SET_SORTS,
    SINK_SORTS,
    exact_table,
    set_table,
    sink_table,
)
from wai_dispatch.service.store.policies import PolicyStore, sinks_of_class
from wai_dispatch.service.store.reports import Filters
from wai_dispatch.service.store.request_error_views import list_errors

router = APIRouter(tags=["fleet"])
Operator = Annotated[Principal, Depends(require(Role.operator))]
Limit = Annotated[int, Query(ge=1, le=500)]
After = Annotated[
    str | None, Query(max_length=512, description="the cursor of the page before (its next)")
]
Millis = Annotated[int | None, Query(ge=0, le=2**53, description="Unix time, milliseconds")]


def classes_of(policies: PolicyStore) -> dict[str, str]:
    """``sink → class`` in the policy in force (empty when none is set)."""
    try:
        current = policies.current()
    except PolicyNotSet:
        return {}
    return {
        sink: name
        for name, cls in sorted(policies.parsed(current).classes.items())
        for sink in cls.sinks
    }


@router.get("/v1/fleet/sinks", summary="Per sink: reports, no-path rate, errors, verdicts")
async def fleet_sinks(
    store: ReportStoreDep,
    policies: PoliciesDep,
    _: Operator,
    chosen: Annotated[Filters, Depends(filters)],
    sort: Annotated[str, Query(pattern="^(" + "|".join(SINK_SORTS) + ")$")] = "sink",
    desc: bool = False,
    q: Annotated[str | None, Query(max_length=128, description="sinks whose name holds it")] = None,
    decoded_nothing: Annotated[
        bool, Query(description="only the sinks none of whose reports of the window decoded")
    ] = False,
    limit: Limit = 50,
    after: After = None,
) -> dict[str, Any]:
    classes = await run_in_threadpool(classes_of, policies)
    return await run_in_threadpool(
        lambda: sink_table(
            store,
            chosen,
            classes=classes,
            sort=sort,
            desc=desc,
            search=q,
            decoded_nothing=decoded_nothing,
            limit=limit,
            after=after,
        )
    )


@router.get("/v1/fleet/sets", summary="Per set digest: reports, no-path rate, sinks, last seen")
async def fleet_sets(
    store: ReportStoreDep,
    _: Operator,
    chosen: Annotated[Filters, Depends(filters)],
    prefix: Annotated[
        str | None, Query(pattern="^[0-9a-fA-F]{1,64}$", description="digests starting with it")
    ] = None,
    sort: Annotated[str, Query(pattern="^(" + "|".join(SET_SORTS) + ")$")] = "reports",
    desc: bool = True,
    limit: Limit = 50,
    after: After = None,
) -> dict[str, Any]:
    return await run_in_threadpool(
        lambda: set_table(
            store, chosen, sort=sort, desc=desc, prefix=prefix, limit=limit, after=after
        )
    )


@router.get("/v1/fleet/exact", summary="Exact-tier decodes per set and symbols digest: RGB digests")
async def fleet_exact(
    store: ReportStoreDep,
    _: Operator,
    chosen: Annotated[Filters, Depends(filters)],
    disagree: Annotated[
        bool, Query(description="only the groups whose decodes gave more than one RGB digest")
    ] = False,
    limit: Limit = 50,
    after: After = None,
) -> dict[str, Any]:
    return await run_in_threadpool(
        lambda: exact_table(store, chosen, disagree=disagree, limit=limit, after=after)
    )


@router.get("/v1/request-errors", summary="Requests answered with a 4xx, by code, route and sink")
async def request_errors(
    store: ReportStoreDep,
    policies: PoliciesDep,
    _: Operator,
    since_ms: Millis = None,
    until_ms: Millis = None,
    sink: Annotated[str | None, Query(max_length=128)] = None,
    sink_class: Annotated[str | None, Query(max_length=64)] = None,
    code: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 50,
    after: After = None,
) -> dict[str, Any]:
    if code is not None and not (is_code(code) or re.fullmatch(r"http_\d{3}", code)):
        raise UnknownToken(f"unknown error code {code!r}: see docs/errors.md")
    sinks: tuple[str, ...] | None = None
    if sink:
        sinks = (sink,)
    elif sink_class:
        sinks = await run_in_threadpool(sinks_of_class, policies, sink_class)
    return await run_in_threadpool(
        lambda: list_errors(
            store,
            since_ms=since_ms,
            until_ms=until_ms,
            sinks=sinks,
            code=code,
            limit=limit,
            after=after,
        )
    )
