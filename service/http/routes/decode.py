"""``POST /v1/decode``: an envelope (JSON or CBOR) in; the picture (PNG, base64 in JSON; raw
``image/png``; or raw RGB8 as ``application/octet-stream``, the last two with the reports in
headers), its digests and every report out. No path: 422
with the reports and the symbols digest. Every report is stored, filed under the token's name.

The handler reads the request, calls the decode use case (:func:`service.usecase.decode.decode`:
parse, prepare, admit, decode, record) and maps its typed outcome to the answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from wai_dispatch.service.http import openapi
from wai_dispatch.service.http.deps import ServiceDep, require
from wai_dispatch.service.http.errors import (
    BodyTooLarge,
    ContentTypeUnsupported,
    NotAcceptable,
    error_body,
    status_of,
)
from wai_dispatch.service.store.bearer import Principal, Role
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.usecase import decode as usecase
from wai_dispatch.service.usecase.decode import (
    DecodeDone,
    DecodeRequest,
    Format,
    NoPathFound,
)

router = APIRouter(tags=["decode"])

_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Envelope"}},
        "application/cbor": {"schema": {"type": "string", "format": "binary"}},
    },
}
_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "decoded",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Decoded"}},
            "image/png": {"schema": {"type": "string", "format": "binary"}},
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "description": "RGB8 samples, row by row (X-Wai-Picture: WxH)",
            },
        },
    },
    422: {
        "description": "bad input, no offered path decodes the envelope, or a request id "
        "sent before with another envelope (request_id_reused)"
    },
    409: {"description": "the request id's first decode is still running (request_in_flight)"},
    401: {"description": "no live bearer token"},
    403: {"description": "the token's role is not sink or above"},
    413: {"description": "over a limit (body, latent, memory or time estimate)"},
    429: {"description": "the decode queue or memory budget is full; see Retry-After"},
}


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes before it is all read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(
            f"the body of {declared} bytes is over max_body_bytes={limit}",
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the body is over max_body_bytes={limit}")
        chunks.append(chunk)
    return b"".join(chunks)


#: The envelope's formats by the request's media type (none: JSON).
_FORMATS: dict[str, Format] = {"application/json": "json", "": "json", "application/cbor": "cbor"}


def _format(content_type: str) -> Format:
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in _FORMATS:
        raise ContentTypeUnsupported(
            f"Content-Type {kind!r}: send application/json or application/cbor",
        )
    return _FORMATS[kind]


#: The answers by media type: JSON (the PNG in base64 beside the digests and reports), the PNG
#: itself, or the RGB8 samples themselves (row by row, R G B per pixel; for sinks that only hash
#: or re-encode the picture), the last two with the reports in ``X-Wai-*`` headers.
_KINDS = {"application/json": "json", "image/png": "png", "application/octet-stream": "rgb"}


def _answer_kind(accept: str) -> str:
    """``json``, ``png`` or ``rgb``: the first of the route's media types ``accept`` names;
    JSON for none named and a wildcard (or no ``Accept``); else ``not_acceptable``."""
    kinds = [p.split(";", 1)[0].strip().lower() for p in accept.split(",")]
    for kind in kinds:
        if kind in _KINDS:
            return _KINDS[kind]
    if accept and not any(k in ("*/*", "application/*") for k in kinds):
        raise NotAcceptable(
            f"Accept {accept[:80]!r}: this route answers application/json, image/png or "
            "application/octet-stream (RGB8)",
        )
    return "json"


@router.post(
    "/v1/decode",
    openapi_extra={"requestBody": _BODY},
    responses=_ANSWERS,
    response_model=openapi.Decoded,
    summary="Decode an envelope",
)
async def decode(
    request: Request,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require(Role.sink))],
) -> Response:
    kind = _answer_kind(request.headers.get("accept", ""))
    body = await read_body(request, service.settings.max_body_bytes)
    asked = DecodeRequest(
        body,
        _format(request.headers.get("content-type", "")),
        principal.name,
        request.scope["state"]["request_id"],
        "rgb" if kind == "rgb" else "png",
    )
    recorder = service.recorder
    with recorder.claim(asked.sink, asked.request_id, lambda: asked.digest):  # one at a time
        outcome = await usecase.decode(
            service.decoder,
            asked,
            gate=service.admission,
            recorder=recorder,
            meter=service.metrics,
            vet=_vet(request, recorder),
        )
    if isinstance(outcome, NoPathFound):
        return JSONResponse(_no_path(request, outcome), status_of(type(outcome.error)))
    return _decoded(kind, asked.request_id, outcome)


def _vet(request: Request, recorder: Recorder) -> Callable[[DecodeRequest], None] | None:
    """The check of the caller's request id against the store (made in the decode's first worker
    thread: another envelope under it is refused); none for a fresh id, never stored."""
    if not request.scope["state"].get("request_id_given", True):
        return None
    return lambda r: recorder.check(r.sink, r.request_id, r.digest)


def _no_path(request: Request, outcome: NoPathFound) -> dict[str, Any]:
    return error_body(
        request,
        outcome.code,
        outcome.error.message,
        reports=outcome.reports,
        report_ids=outcome.report_ids,
        symbols_digest=outcome.symbols_digest,
        undecodable=[u.to_json() for u in outcome.error.undecodable],
    )


def _decoded(kind: str, request_id: str, outcome: DecodeDone) -> Response:
    """The answer of a decode that ran: JSON (:class:`DecodeDone`), or the picture itself with
    the reports in ``X-Wai-*`` headers."""
    result = outcome.result
    height, width = result.rgb.shape[:2]
    if kind != "json":
        headers = {
            "X-Wai-Reports": json.dumps(outcome.reports, separators=(",", ":")),
            "X-Wai-Report-Ids": ",".join(outcome.report_ids),
            "X-Wai-Set": result.part.set_digest,
            "X-Wai-Symbols-Digest": result.part.symbols_digest,
            "X-Wai-Rgb-Digest": outcome.records[-1].rgb_digest or result.rgb_digest,
            "X-Wai-Picture": f"{width}x{height}",
        }
        if kind == "rgb":
            headers["X-Wai-Format"] = "rgb8"
            return Response(outcome.picture, media_type="application/octet-stream", headers=headers)
        return Response(outcome.picture, media_type="image/png", headers=headers)
    # The JSON answer (openapi.Decoded, its fields in that order) written out here, the base64
    # of the PNG spliced in as bytes: it is never a str, never validated by the model nor
    # scanned for escapes by the JSON encoder (base64 has none); the small fields are dumped.
    picture = {"width": width, "height": height, "format": "png"}
    head = {"request_id": request_id, "picture": picture}
    tail = {
        "rgb_digest": outcome.records[-1].rgb_digest or result.rgb_digest,
        "set": result.part.set_digest,
        "symbols_digest": result.part.symbols_digest,
        "reports": outcome.reports,
        "report_ids": outcome.report_ids,
        "undecodable": [u.to_json() for u in result.undecodable],
    }
    png = base64.b64encode(outcome.picture)
    body = b"".join((_json(head)[:-1], b',"png":"', png, b'",', _json(tail)[1:]))
    return Response(body, media_type="application/json")


def _json(value: dict[str, Any]) -> bytes:
    """``value`` as JSONResponse writes it (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
