"""The service's edge: what every request passes before and after its route, whichever route it
is (docs/service.md, Limits).

- Request ids and the request log (:class:`RequestId`, the outermost ASGI middleware): one JSON
  line per request, the id the caller gave (or a new one) carried in
  ``request.state.request_id``, the ``X-Request-Id`` answer header and every stored report; and
  every 4xx answered, whoever answered it (a route, a handler, the dashboard's files, the body
  budget), noted in the request-error log with its code (the answer's own ``error.code``),
  route template and sink (service/store/request_errors.py).
- Connection limits: what a slow or greedy client may hold. :class:`ReadTimeouts`, uvicorn's h11
  protocol with two deadlines per request: its headers arrive within ``header_timeout_s`` of
  its first byte (of the connection, for the first request), its body within
  ``body_timeout_s`` of its headers. Past either, the connection is answered 408
  ``request_timeout`` (when no answer was started) and closed, whether or not the route reads
  the body. ``wai-dispatch serve`` names it to uvicorn (``http=``), beside uvicorn's own
  limits: ``timeout_keep_alive`` (``keep_alive_s``), ``limit_concurrency``
  (``max_connections``: more connections are answered 503) and
  ``h11_max_incomplete_event_size`` (``max_header_bytes``: larger headers are a 400).
  :class:`BodyBudget`, an ASGI middleware: the request bodies being read at once hold at most
  ``max_inflight_body_bytes`` (each counted as its declared ``Content-Length`` from the route's
  first read of it, or as read when chunked). A declared length over the budget itself can
  never be read: 413 ``body_too_large`` before anything is read. Otherwise a body that would go
  over is refused 429 ``bodies_busy`` with ``Retry-After`` at the route's first read, before
  any of it is read, so a route's own cap (``max_body_bytes`` of a decode, checked against the
  declared length before it reads) answers 413 first, however busy the service is.
- Text (:func:`checked_text`, an application-wide FastAPI dependency): the one check every
  route's query and path parameters pass before a route reads them, so that a request gets the
  same answer whatever store is behind the service (PostgreSQL refuses a NUL in text that
  SQLite keeps). A parameter's name or value is refused with 422 ``request_invalid`` naming the
  parameter when it holds a control character (Unicode category Cc: C0, DEL, C1), a lone
  surrogate (which is also what bytes that are not UTF-8 become here: percent-escapes are
  decoded with ``surrogateescape``, never silently replaced), or more than :data:`MAX_TEXT`
  characters.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote

import h11
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wai_dispatch.service import settings as settings_mod
from wai_dispatch.service.http.errors import (
    BodiesBusy,
    BodyTooLarge,
    RequestInvalid,
    RequestTimeout,
    ServiceError,
    status_of,
)
from wai_dispatch.service.settings import Settings
from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.store.request_errors import NO_ROUTE

# --- text at the edge -------------------------------------------------------------------------

#: The longest query or path parameter value (or name) the service reads, in characters; a
#: route's own ``max_length`` is tighter.
MAX_TEXT = 1024
_BAD = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """What is wrong with ``value`` as text a store keeps, or ``None``."""
    if len(value) > MAX_TEXT:
        return f"longer than {MAX_TEXT} characters"
    found = _BAD.search(value)
    if found is None:
        return None
    point = ord(found.group())
    if 0xD800 <= point <= 0xDFFF:
        return "bytes that are not UTF-8 text (or a lone surrogate)"
    return f"a control character (U+{point:04X})"


def _shown(name: str) -> str:
    """A parameter's name as a message can show it: escaped, at most 64 characters."""
    return ascii(name[:64])[1:-1]


def _invalid(where: str, problem: str) -> ServiceError:
    return RequestInvalid(f"{where}: {problem}")


async def checked_text(request: Request) -> None:
    """The application's first dependency: every path parameter, and every query parameter's
    name and value (declared by the route or not), is text a store can keep (``async``: a
    check of the request's own text, made on the event loop rather than in a thread)."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and (problem := text_problem(value)) is not None:
            raise _invalid(f"path.{name}", problem)
    # the path parameters were decoded with U+FFFD for bytes that are not UTF-8: the raw
    # path says whether there were any
    raw_path = request.scope.get("raw_path")
    if isinstance(raw_path, bytes) and b"%" in raw_path:
        decoded = unquote(raw_path.decode("latin-1"), errors="surrogateescape")
        if _SURROGATE.search(decoded) is not None:
            raise _invalid("path", "bytes that are not UTF-8 text (or a lone surrogate)")
    query = request.scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True, errors="surrogateescape"):
        if (problem := text_problem(name)) is not None:
            raise _invalid(f"query name '{_shown(name)}'", problem)
        if (problem := text_problem(value)) is not None:
            raise _invalid(f"query.{_shown(name)}", problem)


# --- request ids and the request log ----------------------------------------------------------

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
                    "request_id": rid,
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "ms": round((time.perf_counter() - start) * 1000, 2),
                    "client": f"{client[0]}:{client[1]}" if client else None,
                }
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
    errors.note(
        status,
        code,
        sink=sink,
        request_id=rid,
        method=scope["method"],
        path=scope["path"],
        route=route_of(scope),
    )


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


# --- connection limits: read deadlines and the body budget ------------------------------------


@functools.cache
def edge_settings() -> Settings:
    """The process's settings, read once, at the first connection (the protocols' limits)."""
    return settings_mod.load()


class ReadDeadlines:
    """A connection's two read deadlines (see the module), whichever parser reads it: the
    protocol arms ``headers`` when a request's first byte arrives (the connection's, for its
    first request), ``body`` once its headers are read and a body is due, and disarms once the
    request is read; past either, :meth:`_expired`. The deadlines are the process's settings
    ``header_timeout_s`` and ``body_timeout_s`` unless a subclass sets these class attributes
    (tests/service/http/test_slow_clients.py)."""

    header_timeout_s: ClassVar[float | None] = None
    body_timeout_s: ClassVar[float | None] = None
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any  # uvicorn's request cycle of the request being answered (None between them)

    def _init_deadlines(self) -> None:
        chosen = edge_settings() if None in (self.header_timeout_s, self.body_timeout_s) else None
        self._limits = {
            "headers": self.header_timeout_s or (chosen and chosen.header_timeout_s) or 10.0,
            "body": self.body_timeout_s or (chosen and chosen.body_timeout_s) or 30.0,
        }
        self._deadline: asyncio.TimerHandle | None = None
        self._reading = ""

    def _answer_started(self) -> bool:
        """Whether the answer to the request being read has begun (a body deadline past then
        closes the connection without a 408)."""
        return self.cycle is not None and bool(self.cycle.response_started)

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
        if not (what == "body" and self._answer_started()):
            name = "header_timeout_s" if what == "headers" else "body_timeout_s"
            message = f"the request's {what} did not arrive within {name}={self._limits[what]:g}"
            error = RequestTimeout(message).to_json()
            body = json.dumps({"error": error}).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
        self.transport.close()


class ReadTimeouts(ReadDeadlines, H11Protocol):
    """uvicorn's h11 protocol (pure Python) with the read deadlines of :class:`ReadDeadlines`;
    uvicorn's ``h11_max_incomplete_event_size`` bounds a request's head."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_deadlines()

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


class ReadTimeoutsHttptools(ReadDeadlines, HttpToolsProtocol):
    """uvicorn's httptools protocol (llhttp, in C) with the same read deadlines, and the same
    bound on a request's head as h11's (``max_header_bytes``: a larger head is answered 400 and
    the connection closed). The parser's callbacks say where a request is: its first byte
    (``on_message_begin``), its head read (``on_headers_complete``), all of it read
    (``on_message_complete``); a deadline is armed after each chunk is parsed, so a request
    that arrives whole in one chunk arms none."""

    max_header_bytes: ClassVar[int | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_deadlines()
        self._max_head = self.max_header_bytes or edge_settings().max_header_bytes
        self._phase = "idle"  # "headers" (begun), "body" (head read, body due), "idle"
        self._head = 0  # bytes of the head being read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm("headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._phase == "headers":
            self._head += len(data)
            if self._head > self._max_head:  # a head still incomplete, already too long
                self._disarm()
                self.send_400_response("Invalid HTTP request received.")
                return
            if self._reading != "headers":
                self._arm("headers")
        elif self._phase == "body":
            if self._reading != "body":
                self._arm("body")
        elif self._deadline is not None:
            self._disarm()  # read whole; between requests uvicorn's keep-alive timeout holds

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._phase, self._head = "headers", 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._head += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._head += len(name) + len(value) + 4

    def on_headers_complete(self) -> None:
        if self._head > self._max_head:
            raise RequestInvalid(f"a request head over max_header_bytes={self._max_head}")
        self._phase = "body"
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._phase = "idle"

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


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
