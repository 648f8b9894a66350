"""``/healthz`` (the process answers), ``/readyz`` (the store answers or the spool takes
reports, and sets are installed) and ``/metrics`` (Prometheus text)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from wai_dispatch.service.http.deps import MetricsDep, ServiceDep

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Ready to decode: store up or spooling, sets installed")
async def readyz(service: ServiceDep) -> JSONResponse:
    up = await run_in_threadpool(service.store.ping)
    spool = service.recorder.spool
    writable = spool.healthy()
    spooling = writable and spool.new_bytes() < spool.max_bytes
    sets = len(await run_in_threadpool(service.decoder.store.list))
    body: dict[str, Any] = {
        "store": "up" if up else ("spooling" if spooling else "down"),
        "spool_bytes": service.recorder.pending_bytes(),
        "sets": sets,
    }
    if not writable:
        body["spool"] = f"cannot write: {spool.failed}"
    ready = (up or spooling) and sets > 0
    body["status"] = "ready" if ready else "not ready"
    return JSONResponse(body, 200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(metrics: MetricsDep) -> Response:
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
