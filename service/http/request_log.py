"""Request ids and the request log: one JSON line per request, the id the caller gave (or a
new one) carried in ``request.state.request_id``, the ``X-Request-Id`` answer header and every
stored report; and every 4xx answered, whoever answered it (a route, a handler, the dashboard's
files, the body budget), noted in the request-error log with its code (the answer's own
``error.code``), route template and sink (service/store/request_errors.py)."""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.store.request_errors import NO_ROUTE

__all__ = ["RequestId", "error_code", "incoming_id", "route_of"]

log = logging.getLogger("wai_dispatch.service")


class RequestId:
    """Gives every request an id (``request.state.request_id``, the ``X-Request-Id`` answer
    header) and logs one JSON line per request: method, path, status, duration, the client's
    address and, once a token was checked, who it is (``sink`` for a sink's token). The id is
    the caller's ``X-Request-Id`` when it is a plain one (:func:`incoming_id`), else the trace
    id of a W3C ``traceparent``, else a new UUID."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = incoming_id(scope.get("headers", [])) or str(uuid.uuid4())
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        start = time.perf_counter()
        status = 500
        code: str | None = None
        first_body = True

        async def send_with_id(message: Message) -> None:
            nonlocal status, code, first_body
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            elif message["type"] == "http.response.body" and first_body:
                first_body = False
                if 400 <= status < 500:
                    code = error_code(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if 400 <= status < 500:
                _note(scope, status, code or f"http_{status}", rid)
            if scope["path"] not in ("/healthz", "/metrics"):
                client = scope.get("client")
                extra = {
                    "request_id": rid, "method": scope["method"], "path": scope["path"],
                    "status": status, "ms": round((time.perf_counter() - start) * 1000, 2),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                }  # fmt: skip
                who = state.get("principal")
                if who is not None:
                    extra["sink" if who.role == Role.sink else "principal"] = who.name
                log.info("request", extra=extra)


def _note(scope: Scope, status: int, code: str, rid: str) -> None:
    """Note a 4xx in the service's request-error log (it only counts in memory)."""
    app = scope.get("app")
    service = getattr(getattr(app, "state", None), "service", None)
    errors = getattr(service, "errors", None)
    if errors is None:
        return
    who = scope.get("state", {}).get("principal")
    sink = who.name if who is not None and who.role == Role.sink else None
    errors.note(status, code, sink=sink, request_id=rid, method=scope["method"],
                path=scope["path"], route=route_of(scope))  # fmt: skip


def route_of(scope: Scope) -> str:
    """The template of the route that answered (``/v1/reports/{report_id}``; a mount's
    ``/dashboard/{path}``), or :data:`NO_ROUTE`: a count key that never holds a client's text."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return NO_ROUTE
    return path.rstrip("/") + "/{path}" if isinstance(route, Mount) else path


_CODE = re.compile(rb'\{"error":\s*\{"code":\s*"([A-Za-z0-9_.-]{1,64})"')


def error_code(body: bytes) -> str | None:
    """The ``error.code`` an error answer's body starts with (every error body of this service
    does: ``{"error": {"code": …``), or ``None``."""
    match = _CODE.match(body[:200])
    return match.group(1).decode() if match else None


_PLAIN_ID = re.compile(rb"[A-Za-z0-9._:-]{1,36}")
_TRACEPARENT = re.compile(rb"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def incoming_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The caller's request id: ``X-Request-Id`` when it is 1–36 characters of letters, digits
    and ``._:-`` (a UUID is 36; the stored reports keep 36), else the trace id of a valid W3C
    ``traceparent`` (not all zeros), else ``None``. Anything else is ignored, never echoed."""
    found: dict[bytes, bytes] = {}
    for name, value in headers:
        found.setdefault(name.lower(), value.strip())
    given = found.get(b"x-request-id")
    if given is not None and _PLAIN_ID.fullmatch(given):
        return given.decode()
    parent = found.get(b"traceparent")
    match = _TRACEPARENT.fullmatch(parent) if parent is not None else None
    if match is not None and match.group(1) != b"0" * 32:
        return match.group(1).decode()
    return None
