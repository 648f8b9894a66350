"""The read deadlines and the head bound of service/http/edge.py on uvicorn's httptools protocol
(llhttp, in C): what ``serve`` runs on when httptools is installed (the ``http`` setting). Its
own module because httptools is optional: service/http/edge.py imports without it."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wai_dispatch.service.http.edge import ReadDeadlines, edge_settings
from wai_dispatch.service.http.errors import RequestInvalid


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
