"""``GET /v1/paths``, ``GET /v1/sets``, ``GET /v1/sets/{digest}``, and (admin)
``POST /v1/sets`` (install an archive: the body is a .tar, .tar.gz or .zip) and
``DELETE /v1/sets/{digest}``. Installs and removals go through the set registry every replica
shares (service/store/setsync.py); the listings are this replica's cache, synced first when
older than ``sets_refresh_s``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParameter
from fastapi.concurrency import run_in_threadpool

from wai_dispatch.codec.sets import (
    InstalledSet,
    SetArchiveInvalid,
    SetError,
    SetFileMissing,
    SetNotInstalled,
)
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.http.deps import DecoderDep, SetsDep, require
from wai_dispatch.service.http.errors import ContentTypeUnsupported
from wai_dispatch.service.http.routes.decode import read_body
from wai_dispatch.service.store.bearer import Principal, Role

router = APIRouter(tags=["sets"])

Digest = Annotated[
    str, PathParameter(pattern="^[0-9a-f]{64}$", description="a set's BLAKE3 digest")
]
_SUFFIX = {
    "application/x-tar": ".tar",
    "application/gzip": ".tar.gz",
    "application/x-gzip": ".tar.gz",
    "application/zip": ".zip",
}
#: The largest set archive POST /v1/sets takes.
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024


@router.get("/v1/paths", summary="This sink's offer: each path present, or absent and why")
async def paths(
    decoder: DecoderDep, _: Annotated[Principal, Depends(require(Role.sink))]
) -> dict[str, Any]:
    rows = await run_in_threadpool(decoder.probe)
    return {"paths": [row.to_json() for row in rows]}


def _public(entry: InstalledSet) -> dict[str, Any]:
    """A set as a client sees it: everything but where the server keeps it."""
    return {k: v for k, v in entry.to_json().items() if k != "path"}


def _sets(decoder: Decoder) -> list[dict[str, Any]]:
    rows = []
    for entry in decoder.set_store.list():
        try:
            default = decoder.set_store.default_for(entry.capability).digest == entry.digest
        except SetError:
            default = False
        rows.append({**_public(entry), "default": default})
    return rows


@router.get("/v1/sets", summary="Installed parameter sets")
async def sets(
    decoder: DecoderDep, registry: SetsDep, _: Annotated[Principal, Depends(require(Role.sink))]
) -> dict[str, Any]:
    await run_in_threadpool(registry.fresh)
    return {"sets": await run_in_threadpool(_sets, decoder)}


@router.get("/v1/sets/{digest}", summary="One installed set: its manifest")
async def one_set(
    decoder: DecoderDep,
    registry: SetsDep,
    digest: Digest,
    _: Annotated[Principal, Depends(require(Role.sink))],
) -> dict[str, Any]:
    await run_in_threadpool(registry.fresh)
    try:
        entry = await run_in_threadpool(decoder.set_store.get, digest)
    except SetNotInstalled:
        registry.confirm_missing()  # the registry unreachable: 503, not 404
        raise
    return {**_public(entry), "facts": entry.manifest.facts.to_json()}


@router.post(
    "/v1/sets",
    summary="Install a set archive (admin)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {k: {"schema": {"type": "string", "format": "binary"}} for k in _SUFFIX},
        }
    },
)
async def install(
    request: Request,
    decoder: DecoderDep,
    registry: SetsDep,
    _: Annotated[Principal, Depends(require(Role.admin))],
) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    suffix = _SUFFIX.get(kind)
    if suffix is None:
        raise ContentTypeUnsupported(
            f"Content-Type {kind!r}: send a set archive as {', '.join(_SUFFIX)}",
        )
    body = await read_body(request, MAX_ARCHIVE_BYTES)

    def put() -> InstalledSet:
        with tempfile.TemporaryDirectory(prefix="wai-upload-") as tmp:
            archive = Path(tmp) / f"set{suffix}"
            archive.write_bytes(body)
            # checked, its programs loaded (else refused), then put into the registry
            try:
                return decoder.set_store.get(registry.install(archive))
            except SetFileMissing as exc:
                # the client's archive lacks a file its manifest lists (or is empty): malformed
                # input (422), not a resource this server is missing (404)
                raise SetArchiveInvalid(f"the archive is incomplete: {exc.message}") from None

    entry = await run_in_threadpool(put)
    return _public(entry)


@router.delete("/v1/sets/{digest}", summary="Remove a set (admin)")
async def remove(
    registry: SetsDep, digest: Digest, _: Annotated[Principal, Depends(require(Role.admin))]
) -> dict[str, Any]:
    # its tombstone in the registry (set_not_installed when not live there), then dropped from
    # this replica's cache and opened sets; the others drop it at their next sync
    await run_in_threadpool(registry.remove, digest)
    return {"removed": digest}
