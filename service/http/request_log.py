"""Request ids and the request log: one JSON line per request, the id the caller gave (or a
new one) carried in ``request.state.request_id``, the ``X-Request-Id`` answer header and every
stored report."""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wai_dispatch.service.store.tokens import Role

__all__ = ["RequestId", "incoming_id"]

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

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
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
