"""Fleet governance over HTTP: ``POST /v1/run-reports`` (a sink submits its run report and gets
the verdict), ``GET /v1/run-reports/summary`` and ``/v1/run-reports/{id}`` (the dashboard),
and the model policy (``GET``/``PUT /v1/policy``, ``GET /v1/policy/history``; admin only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool

from wai_dispatch.service.governance import loads_run_report
from wai_dispatch.service.governance.policy import MAX_POLICY_BYTES
from wai_dispatch.service.governance.runreport import MAX_RUN_REPORT_BYTES
from wai_dispatch.service.http.deps import PoliciesDep, ReportStoreDep, require
from wai_dispatch.service.http.routes.decode import read_body
from wai_dispatch.service.store.bearer import Principal, Role
from wai_dispatch.service.store.policies import get_run_report, governance_summary, submit

router = APIRouter(tags=["governance"])
Millis = Annotated[int | None, Query(ge=0, le=2**53, description="Unix time, milliseconds")]


@router.post(
    "/v1/run-reports",
    summary="Submit a run report (wai-run-report/1); the answer is its verdict",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def post_run_report(
    request: Request,
    store: ReportStoreDep,
    policies: PoliciesDep,
    principal: Annotated[Principal, Depends(require(Role.sink))],
) -> dict[str, Any]:
    body = await read_body(request, MAX_RUN_REPORT_BYTES)
    run = await run_in_threadpool(loads_run_report, body)  # off the event loop: up to 16 MiB
    verdict, replayed = await run_in_threadpool(
        submit, store, policies, run, body, sink=principal.name
    )
    return {**verdict, "replayed": replayed}


@router.get("/v1/run-reports/summary", summary="Compliance per sink class, latest refused")
async def run_reports_summary(
    store: ReportStoreDep,
    policies: PoliciesDep,
    _: Annotated[Principal, Depends(require(Role.operator))],
    since_ms: Millis = None,
    until_ms: Millis = None,
    sink_class: Annotated[str | None, Query(max_length=64)] = None,
    sink: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=500, description="refused run reports listed")] = 10,
    after: Annotated[
        str | None, Query(max_length=512, description="the cursor of the page before (its next)")
    ] = None,
) -> dict[str, Any]:
    return await run_in_threadpool(
        lambda: governance_summary(
            store,
            policies,
            since_ms=since_ms,
            until_ms=until_ms,
            sink_class=sink_class,
            sink=sink,
            latest=limit,
            after=after,
        )
    )


@router.get("/v1/run-reports/{run_id}", summary="One run report, as submitted, with its verdict")
async def run_report(
    store: ReportStoreDep,
    run_id: Annotated[str, Path(max_length=128)],
    principal: Annotated[Principal, Depends(require(Role.sink))],
    sink: Annotated[
        str | None, Query(max_length=128, description="whose run report (ids are per sink)")
    ] = None,
) -> dict[str, Any]:
    own = principal.name if principal.role is Role.sink else sink
    return await run_in_threadpool(get_run_report, store, run_id, own)


@router.get("/v1/policy", summary="The model policy in force, or one version (admin)")
async def get_policy(
    policies: PoliciesDep,
    _: Annotated[Principal, Depends(require(Role.admin))],
    version: Annotated[int | None, Query(ge=1, le=2**31)] = None,
) -> dict[str, Any]:
    chosen = await run_in_threadpool(
        policies.current if version is None else lambda: policies.get(version)
    )
    out: dict[str, Any] = chosen.to_json()
    return out


@router.get("/v1/policy/history", summary="Every version of the model policy: who, when (admin)")
async def policy_history(
    policies: PoliciesDep, _: Annotated[Principal, Depends(require(Role.admin))]
) -> dict[str, Any]:
    versions = await run_in_threadpool(policies.versions)
    return {"versions": [v.to_json(with_text=False) for v in versions]}


@router.put(
    "/v1/policy",
    summary="Set the model policy (wai-model-policy/1, YAML or JSON); admin",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/yaml": {"schema": {"type": "string"}}},
        }
    },
)
async def put_policy(
    request: Request,
    policies: PoliciesDep,
    principal: Annotated[Principal, Depends(require(Role.admin))],
) -> dict[str, Any]:
    body = await read_body(request, MAX_POLICY_BYTES)
    version = await run_in_threadpool(lambda: policies.set(body, by=principal.name))
    out: dict[str, Any] = version.to_json(with_text=False)
    return out
