"""``POST /v1/decode``: an envelope (JSON or CBOR) in; the picture (PNG, base64 in JSON; raw
``image/png``; or raw RGB8 as ``application/octet-stream``, the last two with the reports in
headers), its digests and every report out. No path: 422
with the reports and the symbols digest. Every report is stored, filed under the token's name.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from wai_dispatch.codec import envelope as envelope_codec
from wai_dispatch.codec import envelope_read
from wai_dispatch.codec.errors import Limits
from wai_dispatch.dispatch.codes import ErrorCode, status_of
from wai_dispatch.service.decoding.results import NoPath
from wai_dispatch.service.http.admission import estimate
from wai_dispatch.service.http.auth import require
from wai_dispatch.service.http.deps import Service, ServiceDep
from wai_dispatch.service.http.errors import ServiceError, error_body
from wai_dispatch.service.store.records import ReportRecord, records_for
from wai_dispatch.service.store.tokens import Principal, Role

log = logging.getLogger("wai_dispatch.decode")
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
    422: {"description": "bad input, or no offered path decodes the envelope"},
    401: {"description": "no live bearer token"},
    403: {"description": "the token's role is not sink or above"},
    413: {"description": "over a limit (body, latent, memory or time estimate)"},
    429: {"description": "the decode queue or memory budget is full; see Retry-After"},
}


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes before it is all read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ServiceError(
            f"the body of {declared} bytes is over max_body_bytes={limit}",
            code=ErrorCode.BODY_TOO_LARGE,
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServiceError(
                f"the body is over max_body_bytes={limit}", code=ErrorCode.BODY_TOO_LARGE
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(body: bytes, content_type: str, limits: Limits) -> envelope_codec.Envelope:
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind in ("application/json", ""):
        return envelope_read.parse_json(body, limits=limits)
    if kind == "application/cbor":
        return envelope_read.parse_cbor(body, limits=limits)
    raise ServiceError(
        f"Content-Type {kind!r}: send application/json or application/cbor",
        code=ErrorCode.CONTENT_TYPE_UNSUPPORTED,
    )


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
        raise ServiceError(
            f"Accept {accept[:80]!r}: this route answers application/json, image/png or "
            "application/octet-stream (RGB8)",
            code=ErrorCode.NOT_ACCEPTABLE,
        )
    return "json"


@router.post(
    "/v1/decode",
    openapi_extra={"requestBody": _BODY},
    responses=_ANSWERS,
    summary="Decode an envelope",
)
async def decode(
    request: Request,
    service: ServiceDep,
    principal: Annotated[Principal, Depends(require(Role.sink))],
) -> Response:
    decoder = service.decoder
    rid = request.scope["state"]["request_id"]
    kind = _answer_kind(request.headers.get("accept", ""))
    body = await read_body(request, service.settings.max_body_bytes)
    ctype = request.headers.get("content-type", "")
    envelope = await run_in_threadpool(_parse, body, ctype, decoder.limits)
    # Each part's header read and set opened once: the estimate and the decode share them.
    prepared = await run_in_threadpool(decoder.prepare, envelope)
    est = estimate(prepared)
    started = time.perf_counter()

    def work() -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            result = decoder.decode(prepared)
        except NoPath as exc:
            facts = {p.capability: (p.set_digest, p.symbols_digest) for p in exc.parts}
            recs = _records(exc.reports, facts, None, t0, rid, principal, envelope)
            _store(service, recs)
            return {"no_path": exc, "records": recs}
        service.admission.measured(est.pixels, time.perf_counter() - t0)  # calibrates the time
        part = result.part
        facts = {part.capability: (part.set_digest, part.symbols_digest)}
        rgb_digest = result.rgb_digest
        recs = _records(result.reports, facts, rgb_digest, t0, rid, principal, envelope)
        _store(service, recs)
        ran = recs[-1].path_ran or "none"
        service.metrics.decode_seconds.labels(ran).observe(time.perf_counter() - t0)
        # the answer is made here, in the decode's thread: RGB8 as it is, else the PNG
        answer = result.rgb.tobytes() if kind == "rgb" else result.png()
        return {"result": result, "records": recs, "answer": answer, "rgb_digest": rgb_digest}

    out = await service.admission.run(est, work)
    service.metrics.request_seconds.observe(time.perf_counter() - started)
    records = out["records"]
    reports = [r.report for r in records]
    ids = [r.id for r in records]
    if "no_path" in out:
        exc: NoPath = out["no_path"]
        service.metrics.errors.labels(exc.code).inc()
        symbols_digest = exc.parts[-1].symbols_digest if exc.parts else None
        body_obj = error_body(
            request, exc.code, exc.message, reports=reports, report_ids=ids,
            symbols_digest=symbols_digest, undecodable=[u.to_json() for u in exc.undecodable],
        )  # fmt: skip
        log.info("decode", extra={"request_id": rid, "sink": principal.name, "outcome": "no_path"})
        return JSONResponse(body_obj, status_of(exc.code))
    result = out["result"]
    height, width = result.rgb.shape[:2]
    log.info("decode", extra={
        "request_id": rid, "sink": principal.name, "outcome": "decoded",
        "path": records[-1].path_ran, "ms": records[-1].duration_ms,
    })  # fmt: skip
    if kind != "json":
        headers = {
            "X-Wai-Reports": json.dumps(reports, separators=(",", ":")),
            "X-Wai-Report-Ids": ",".join(ids),
            "X-Wai-Set": result.part.set_digest,
            "X-Wai-Symbols-Digest": result.part.symbols_digest,
            "X-Wai-Rgb-Digest": out["rgb_digest"],
            "X-Wai-Picture": f"{width}x{height}",
        }
        if kind == "rgb":
            headers["X-Wai-Format"] = "rgb8"
            return Response(out["answer"], media_type="application/octet-stream", headers=headers)
        return Response(out["answer"], media_type="image/png", headers=headers)
    return JSONResponse(
        {
            "request_id": rid,
            "picture": {"width": width, "height": height, "format": "png"},
            "png": base64.b64encode(out["answer"]).decode("ascii"),
            "rgb_digest": out["rgb_digest"],
            "set": result.part.set_digest,
            "symbols_digest": result.part.symbols_digest,
            "reports": reports,
            "report_ids": ids,
            "undecodable": [u.to_json() for u in result.undecodable],
        }
    )


def _records(
    reports: list[Any],
    facts: dict[str, tuple[str, str]],
    rgb_digest: str | None,
    t0: float,
    rid: str,
    principal: Principal,
    envelope: envelope_codec.Envelope,
) -> list[ReportRecord]:
    """The records of a decode's reports; a part the entropy stage never reached (its set not
    installed, or a primary that had no path) has the set the envelope named, if any."""
    given = {p.capability: p.set for p in envelope.parts()}
    return records_for(
        reports,
        request_id=rid,
        sink=principal.name,
        set_digests=[facts.get(r.capability, (given.get(r.capability), ""))[0] for r in reports],
        symbols_digests=[facts.get(r.capability, (None, None))[1] for r in reports],
        rgb_digest=rgb_digest,
        duration_ms=(time.perf_counter() - t0) * 1000,
    )


def _store(service: Service, records: list[ReportRecord]) -> None:
    service.recorder.record(records)
    for rec in records:
        service.metrics.decodes.labels(rec.path_ran or "none", rec.tier or "none",
                                       rec.outcome).inc()  # fmt: skip
        for refusal in rec.refusals:
            service.metrics.refusals.labels(refusal.code).inc()
