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
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.store.request_errors import NO_ROUTE

__all__ = ["RequestId", "error_code", "incoming_id", "route_of"]

log = logging.getLogger("wai_dispatch.service")
OnError = Callable[[Request, Exception], Awaitable[Response]]


class RequestId:
    """Gives every request an id (``request.state.request_id``, the ``X-Request-Id`` answer
    header) and logs one JSON line per request: method, path, status, duration, the client's
    address and, once a token was checked, who it is (``sink`` for a sink's token). The id is
    the caller's ``X-Request-Id`` when it is a plain one (:func:`incoming_id`;
    ``request.state.request_id_given``), else a new UUID.

    An exception no handler took is answered here with ``on_error``'s answer (500 with the
    request id) and not raised on: raised past the app, the server would close the keep-alive
    connection under a client that is already reusing it. Only once half an answer is sent is it
    raised, and the server closes the connection (there is no other clean end for it)."""

    def __init__(self, app: ASGIApp, on_error: OnError | None = None) -> None:
        self.app = app
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = incoming_id(scope.get("headers", []))
        rid = given or str(uuid.uuid4())
        state = scope.setdefault("state", {})
        state["request_id"], state["request_id_given"] = rid, given is not None
        start = time.perf_counter()
        status = 500
        code: str | None = None
        first_body = True
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, code, first_body, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            elif message["type"] == "http.response.body" and first_body:
                first_body = False
                if 400 <= status < 500:
                    code = error_code(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if started or self.on_error is None:
                raise
            answer = await self.on_error(Request(scope, receive), exc)
            await answer(scope, receive, send_with_id)
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


def incoming_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The caller's request id: its ``X-Request-Id`` when it is 1–36 characters of letters,
    digits and ``._:-`` (a UUID is 36; the stored reports keep 36), else ``None``: anything else
    is ignored, never echoed. A W3C ``traceparent`` names a trace, not a request (two decodes
    in one trace are two requests): it gives no id."""
    for name, value in headers:
        if name.lower() == b"x-request-id":
            given = value.strip()
            return given.decode() if _PLAIN_ID.fullmatch(given) else None
    return None
