"""The sink's HTTP/1.1 client, on the standard library's ``socket`` alone: one ``POST`` per
connection, the answer read by ``Content-Length``, chunked coding, or to the end; ``ssl`` only
for ``https``. Not httpx or ``http.client``: ``decode --url`` is held to twice the start-up of
``python -c pass`` (docs/cli.md#what---help-costs).

Failures are :class:`NotConnected` (no connection, or dropped before a status line: retried) and
:class:`NoAnswer` (no answer within the timeout, or not HTTP: not retried)."""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.parse

#: The most a status line or header line may hold, and the most header lines.
MAX_LINE = 64 * 1024
MAX_HEADERS = 200


class NotConnected(Exception):
    """No connection, or it ended before the answer's status line."""


class NoAnswer(Exception):
    """The request was sent; no (HTTP) answer came within the timeout."""


class Answer:
    """An answer: its status, its headers (lower-case names; a repeated header's last value)
    and its body. (A plain class: ``dataclasses`` costs ``inspect`` and ``ast`` at start-up.)"""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


def split_url(url: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path)`` of an ``http``/``https`` URL; ``ValueError`` otherwise."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, parts.hostname, port, path


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> Answer:
    """POST ``body`` to ``url``; the answer. ``timeout`` bounds the connection and the
    answer (as a whole, from the moment the request is sent)."""
    try:
        scheme, host, port, path = split_url(url)
    except ValueError as exc:
        raise NoAnswer(str(exc)) from None
    try:
        # an ASCII name as bytes: a str is encoded with the idna codec (stringprep, unicodedata)
        name: str | bytes = host.encode("ascii") if host.isascii() else host
        sock = socket.create_connection((name, port), timeout=timeout)  # type: ignore[arg-type]
    except TimeoutError:
        raise NotConnected(f"no connection within {timeout:g} s") from None
    except OSError as exc:
        raise NotConnected(exc.strerror or str(exc)) from None
    with sock:
        if scheme == "https":
            import ssl  # only an https URL pays for OpenSSL

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        netloc = host if ":" not in host else f"[{host}]"
        default = 443 if scheme == "https" else 80
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: {netloc}" + ("" if port == default else f":{port}"),
        ]
        sent = {"Content-Length": str(len(body)), "Connection": "close", **headers}
        lines += [f"{name}: {value}" for name, value in sent.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        try:
            sock.sendall(request)
        except OSError as exc:
            # The service may have answered before it read the body (413: a declared length
            # over its cap) and closed: that answer, when it came, is the answer (not retried).
            early = _early(sock)
            if early is None:
                raise NotConnected(exc.strerror or str(exc)) from None
            return early
        return _read(sock, time.monotonic() + timeout)


def _early(sock: socket.socket) -> Answer | None:
    """An answer already received on a connection whose send failed, else ``None``."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    try:
        return _read(sock, time.monotonic() + 1.0)
    except (NotConnected, NoAnswer, OSError):
        return None


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buffer = sock, deadline, b""

    def _more(self) -> bool:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise NoAnswer("no answer within the timeout")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            raise NoAnswer("no answer within the timeout") from None
        self.buffer += chunk
        return bool(chunk)

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise NoAnswer("an answer line over 64 KiB: not HTTP")
            if not self._more():
                raise NotConnected("the connection ended before the answer")
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not self._more():
                raise NotConnected("the connection ended inside the answer")
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def rest(self) -> bytes:
        while self._more():
            pass
        data, self.buffer = self.buffer, b""
        return data


def _read(sock: socket.socket, deadline: float) -> Answer:
    reader = _Reader(sock, deadline)
    try:
        status_line = reader.line().decode("latin-1")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise NoAnswer(f"not an HTTP answer: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS):
            line = reader.line()
            if not line:
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            raise NoAnswer(f"more than {MAX_HEADERS} header lines: not HTTP")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = b""
            while size := int(reader.line().split(b";")[0].strip() or b"0", 16):
                body += reader.exactly(size)
                reader.line()
        elif (length := headers.get("content-length", "")).isdigit():
            body = reader.exactly(int(length))
        else:
            body = reader.rest()
    except ValueError:
        raise NoAnswer("a chunk size that is not hexadecimal: not HTTP") from None
    except ConnectionError as exc:
        raise NotConnected(exc.strerror or str(exc)) from None
    return Answer(int(code), headers, body)
