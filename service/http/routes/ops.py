"""``/healthz`` (the process answers), ``/readyz`` (the store answers, or the spool has room
for the next decode's reports by the rule its append refuses by; this replica can decode every
set the set registry lists: each in its cache and whole, missing and damaged ones listed; and
the sets are warm: each one's program was built and run once, ``programs`` is ``warming``
until then) and ``/metrics`` (Prometheus text)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from wai_dispatch.codec.sets import SetStore
from wai_dispatch.service.http.deps import MetricsDep, ServiceDep

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Ready to decode: store up or spooling, the registry's sets here")
async def readyz(service: ServiceDep) -> JSONResponse:
    up = await run_in_threadpool(service.report_store.ping)
    spool = service.recorder.spool
    writable = spool.healthy()
    spooling = writable and spool.takes_next()
    sets, damaged = await run_in_threadpool(_sets, service.decoder.set_store)
    registry = service.sets
    missing = await run_in_threadpool(registry.missing)
    body: dict[str, Any] = {
        "store": "up" if up else ("spooling" if spooling else "down"),
        "spool_bytes": service.recorder.pending_bytes(),
        "sets": sets,
        "registry_sets": len(registry.state.listed),
    }
    if damaged:
        body["damaged_sets"] = damaged
    if missing:
        body["missing_sets"] = missing
    if not writable:
        body["spool"] = f"cannot write: {spool.failed}"
    elif (cannot := await run_in_threadpool(spool.probe)) is not None:
        writable = False
        body["spool"] = f"cannot write: {cannot}"
    floor = service.settings.min_free_bytes
    free = {"data": _free(service.settings.data_dir), "spool": _free(spool.directory)}
    body["free_bytes"] = free
    low = [
        f"the {name} volume has {n} bytes free, under min_free_bytes={floor}"
        for name, n in free.items()
        if n is not None and n < floor
    ]
    # Ready: this replica can decode every set the registry listed at its last sync (each in
    # the cache and whole); before the registry was first read (down since the start), the
    # cache's sets as last synced, at least one
    if registry.state.read:
        have_sets = not missing
    else:
        body["registry"] = "not read yet"
        have_sets = sets > 0
    warmup = service.warmup
    body["programs"] = warmup.state()
    if warmup.done.is_set():
        body["warmed"] = [w.to_json() for w in warmup.results]
    # no set can be opened although the registry lists some, or every one is damaged
    no_set = sets == 0 and bool(registry.state.listed or damaged)
    reasons = [*low]
    if not writable:
        reasons.append(f"the spool cannot take a line ({body['spool'][len('cannot write: ') :]})")
    if not (up or spooling):
        reasons.append("the store is down and the spool has no room for a decode's reports")
    if not have_sets or no_set:
        reasons.append("no set can be opened" if no_set else "a set the registry lists is not here")
    if not warmup.done.is_set():
        reasons.append("the sets are warming")
    ready = not reasons
    if reasons:
        body["reasons"] = reasons
    body["status"] = "ready" if ready else "not ready"
    return JSONResponse(body, 200 if ready else 503)


def _free(directory: Path) -> int | None:
    """Free bytes (for an unprivileged writer) on the volume holding ``directory``."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _sets(store: SetStore) -> tuple[int, list[str]]:
    """How many installed sets look whole, and the digests of those that do not: a manifest
    that does not read, or a file gone, of another type or size (one ``lstat`` each; a file's
    bytes are checked when a decode opens it, which answers 503 ``set_damaged``)."""
    damaged = set(store.damaged())
    whole = 0
    for item in store.list():
        if store.intact(item.digest, full=False):
            whole += 1
        else:
            damaged.add(item.digest)
    return whole, sorted(damaged)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(metrics: MetricsDep) -> Response:
    body = await run_in_threadpool(metrics.exposition)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
