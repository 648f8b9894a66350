"""Connection limits (docs/service.md, Limits): what a slow or greedy client may hold.

- :class:`ReadTimeouts`, uvicorn's h11 protocol with two deadlines per request: its headers
  arrive within ``header_timeout_s`` of its first byte (of the connection, for the first
  request), its body within ``body_timeout_s`` of its headers. Past either, the connection is
  answered 408 ``request_timeout`` (when no answer was started) and closed, whether or not the
  route reads the body. ``wai-dispatch serve`` names it to uvicorn (``http=``), beside
  uvicorn's own limits: ``timeout_keep_alive`` (``keep_alive_s``), ``limit_concurrency``
  (``max_connections``: more connections are answered 503) and
  ``h11_max_incomplete_event_size`` (``max_header_bytes``: larger headers are a 400).
- :class:`BodyBudget`, an ASGI middleware: the request bodies being read at once hold at most
  ``max_inflight_body_bytes`` (each counted as its declared ``Content-Length`` from the route's
  first read of it, or as read when chunked). A declared length over the budget itself can
  never be read: 413 ``body_too_large`` before anything is read. Otherwise a body that would go
  over is refused 429 ``bodies_busy`` with ``Retry-After`` at the route's first read, before
  any of it is read, so a route's own cap (``max_body_bytes`` of a decode, checked against the
  declared length before it reads) answers 413 first, however busy the service is.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any, ClassVar

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from wai_dispatch.service import settings as settings_mod
from wai_dispatch.service.http.errors import (
    BodiesBusy,
    BodyTooLarge,
    RequestTimeout,
    ServiceError,
    status_of,
)
from wai_dispatch.service.settings import Settings

__all__ = ["BodyBudget", "ReadTimeouts", "read_timeouts"]


@functools.cache
def _settings() -> Settings:
    return settings_mod.load()


class ReadTimeouts(H11Protocol):
    """uvicorn's h11 protocol with a header and a body read deadline per request (the
    process's settings ``header_timeout_s`` and ``body_timeout_s`` unless a subclass says,
    :func:`read_timeouts`)."""

    header_timeout_s: ClassVar[float | None] = None
    body_timeout_s: ClassVar[float | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        chosen = _settings() if None in (self.header_timeout_s, self.body_timeout_s) else None
        self._limits = {
            "headers": self.header_timeout_s or (chosen and chosen.header_timeout_s) or 10.0,
            "body": self.body_timeout_s or (chosen and chosen.body_timeout_s) or 30.0,
        }
        self._deadline: asyncio.TimerHandle | None = None
        self._reading = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm("headers")

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._deadline is None:
            self._arm("headers")  # the next request on a kept-alive connection
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is not h11.IDLE:
            self._follow()
        elif self._reading != "headers":
            self._disarm()  # idle between requests: uvicorn's keep-alive timeout holds

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _follow(self) -> None:
        state = self.conn.their_state
        if state is h11.IDLE:
            return  # the headers are still coming
        if state is h11.SEND_BODY:
            if self._reading != "body":
                self._arm("body")
        else:
            self._disarm()

    def _arm(self, what: str) -> None:
        self._disarm()
        self._reading = what
        self._deadline = self.loop.call_later(self._limits[what], self._expired, what)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._reading = ""

    def _expired(self, what: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        answered = what == "body" and self.cycle is not None and self.cycle.response_started
        if not answered:
            name = "header_timeout_s" if what == "headers" else "body_timeout_s"
            message = f"the request's {what} did not arrive within {name}={self._limits[what]:g}"
            error = RequestTimeout(message).to_json()
            body = json.dumps({"error": error}).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
        self.transport.close()


def read_timeouts(header_timeout_s: float, body_timeout_s: float) -> type[ReadTimeouts]:
    """:class:`ReadTimeouts` with these deadlines (an in-process server, a test)."""
    return type(
        "ReadTimeoutsOf",
        (ReadTimeouts,),
        {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s},
    )


class BodyBudget:
    """At most ``limit`` bytes of request bodies being read at once (see the module)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.held = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            message = (
                f"the body of {declared} bytes is over max_inflight_body_bytes={self.limit}: "
                "it can never be read here"
            )
            await _refuse(scope, send, BodyTooLarge(message))
            return
        held = 0

        async def counted() -> Message:
            nonlocal held
            if declared and not held:  # the route's first read: the body's bytes are charged
                if self.held + declared > self.limit:
                    again = {"Connection": "close"}
                    raise BodiesBusy(_busy(self), headers=again, retry_after_s=1)
                held = declared
                self.held += declared
            message = await receive()
            if declared is None and message["type"] == "http.request":
                size = len(message.get("body", b""))
                held += size
                self.held += size
            return message

        try:
            await self.app(scope, counted, send)
        finally:
            self.held -= held


def _busy(budget: BodyBudget) -> str:
    return (
        f"request bodies being read hold {budget.held >> 20} MiB of "
        f"max_inflight_body_bytes={budget.limit >> 20} MiB; retry later"
    )


def _content_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key == b"content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None


async def _refuse(scope: Scope, send: Send, error: ServiceError) -> None:
    """Answer before the application runs (and close: the body is never read)."""
    rid = str(scope.get("state", {}).get("request_id", ""))
    body = json.dumps({"error": error.to_json(), "request_id": rid})
    data = body.encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"connection", b"close"),
    ]
    status = status_of(type(error))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
