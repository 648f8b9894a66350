"""``/page/``: the browser page (docs/page.md): its static files (``page_files/``) and the
data routes a decode in the page reads (:class:`~service.web.page_data.PageData`), each taking
a sink's bearer token, the costly ones admitted as decodes are; kept out of the OpenAPI schema.
"""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response

from wai_dispatch.paths.waiops.onnx_engine import isqrt_check_model
from wai_dispatch.service.decoding.prepare import estimate, estimate_of
from wai_dispatch.service.http.deps import DecoderDep, ServiceDep, require
from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.web.errors import PageNotFound
from wai_dispatch.service.web.page_data import PageData, media_type
from wai_dispatch.service.web.page_wgsl import read_limits, read_shape
from wai_dispatch.service.web.static import HEADERS, WebAssets

#: Every data route: a bearer token of the sink role or above (anyone who may decode), checked
#: before the route reads its parameters or does any work.
router = APIRouter(
    prefix="/page",
    tags=["page"],
    include_in_schema=False,
    dependencies=[Depends(require(Role.sink))],
)
_DIGEST = r"^[0-9a-f]{64}$"


def page_dir() -> Path:
    """Where the page's static files live (``wai_dispatch/service/web/page_files``)."""
    return Path(str(resources.files("wai_dispatch.service.web").joinpath("page_files")))


def page_data(request: Request, decoder: DecoderDep) -> PageData:
    """The page's data over this process's Decoder, made on first use and kept."""
    state = request.app.state
    data: PageData | None = getattr(state, "page_data", None)
    if data is None:
        data = PageData(decoder)
        state.page_data = data
    return data


Data = Annotated[PageData, Depends(page_data)]
Digest = Annotated[str, PathParam(pattern=_DIGEST)]


def _bytes(body: bytes, media: str) -> Response:
    return Response(body, media_type=media, headers=HEADERS)


def _json(value: Any) -> Response:
    return _bytes(json.dumps(value, separators=(",", ":")).encode(), "application/json")


#: What reading a set costs at most, for admission: its files held and hashed once.
_SET_READ = estimate_of(0, 0)


@router.get("/samples.json")
async def samples(data: Data) -> Response:
    return _json(data.sample_names())


@router.get("/samples/{name}")
async def sample(name: str, data: Data) -> Response:
    return _bytes(await run_in_threadpool(data.sample, name), "application/json")


@router.get("/reference/{name}")
async def reference(name: str, data: Data, service: ServiceDep) -> Response:
    cached = data.cached_reference(name)
    if cached is None:
        computing = data.computing.get(name)
        if computing is None:
            computing = asyncio.ensure_future(_reference(name, data, service))
            data.computing[name] = computing
            computing.add_done_callback(lambda done: _forget(data, name, done))
        cached = await asyncio.shield(computing)  # one leaving does not stop it for the rest
    return _json(cached)


async def _reference(name: str, data: PageData, service: ServiceDep) -> dict[str, Any]:
    prepared = await service.admission.run(_SET_READ, lambda: data.prepare_reference(name))
    est = estimate(prepared)
    return await service.admission.run(est, lambda: data.reference(name, prepared))


def _forget(data: PageData, name: str, done: asyncio.Future[dict[str, Any]]) -> None:
    data.computing.pop(name, None)
    if not done.cancelled():
        done.exception()  # retrieved: the requests waiting on it raise it


@router.get("/corpus.json")
async def corpus(data: Data) -> Response:
    return _bytes(await run_in_threadpool(data.corpus_json), "application/json")


@router.get("/corpus/{name}")
async def corpus_payload(name: str, data: Data) -> Response:
    return _bytes(await run_in_threadpool(data.corpus_payload, name), "application/octet-stream")


@router.get("/sets/default/{capability}")
async def default_set(capability: str, data: Data) -> Response:
    return _json({"digest": await run_in_threadpool(data.default_set, capability)})


@router.get("/sets/{digest}/manifest.json")
async def manifest(digest: Digest, data: Data, service: ServiceDep) -> Response:
    body = await service.admission.run(_SET_READ, lambda: data.manifest(digest))
    return _bytes(body, "application/json")


@router.get("/sets/{digest}/files/{name}")
async def set_file(digest: Digest, name: str, data: Data, service: ServiceDep) -> Response:
    body = await service.admission.run(_SET_READ, lambda: data.set_file(digest, name))
    return _bytes(body, media_type(name))


@router.get("/sets/{digest}/wgsl/constants.bin")
async def wgsl_constants(digest: Digest, data: Data, service: ServiceDep) -> Response:
    body = await service.admission.run(_SET_READ, lambda: data.wgsl_constants(digest))
    return _bytes(body, "application/octet-stream")


@router.get("/sets/{digest}/wgsl/plan")
async def wgsl_plan(
    digest: Digest, data: Data, service: ServiceDep, shape: str = "", limits: str = ""
) -> Response:
    # read and bounded before anything is planned: a shape over the decode's limits is
    # refused here, one over max_latent_elements or the memory and time budget by admission
    dims, browser = read_shape(shape), read_limits(limits)
    est = data.plan_estimate(dims)
    plan = await service.admission.run(est, lambda: data.wgsl_plan(digest, dims, browser))
    return _json(plan)


@router.get("/sets/{digest}/waiops/float32.onnx")
async def waiops_graph(digest: Digest, data: Data, service: ServiceDep) -> Response:
    body = await service.admission.run(_SET_READ, lambda: data.waiops_graph(digest))
    return _bytes(body, "application/octet-stream")


@router.get("/waiops/isqrt-check")
async def isqrt_check() -> Response:
    # the native float32 engine's check of ONNX Runtime's Floor(Sqrt(n)), for the page's
    # cpu/wai-ops/integer path to run on ONNX Runtime Web (js/waiops_wasm.js)
    return _bytes(await run_in_threadpool(isqrt_check_model), "application/octet-stream")


def install(app: FastAPI) -> None:
    """The page's routes and its static files on ``app``."""

    @app.get("/page", include_in_schema=False)
    async def page_root(request: Request) -> RedirectResponse:
        return RedirectResponse(str(request.url_for("page", path="/")), status_code=308)

    app.include_router(router)
    app.mount("/page", WebAssets(str(page_dir()), missing=PageNotFound), name="page")
