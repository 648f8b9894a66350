"""The HTTP service's own errors, and the status of every error class.

A client's mistake is a 4xx carrying ``{"error": {"code", "message"}, "request_id"}``; a fault
of the service or of what it waits on is a 5xx. The status follows the error's class: each kind
of the core (:mod:`dispatch.errors`) has its status in :data:`STATUSES`, and so have the HTTP
layer's own cases (401, 405, 406, 408, 415, 504, a client that left); the app registers one
handler per entry and Starlette picks it by the exception's method-resolution order, as
:func:`status_of` does. No code is named here but this layer's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Request

from wai_dispatch.dispatch.errors import (
    Busy,
    Conflict,
    Forbidden,
    Internal,
    InvalidInput,
    Malformed,
    NotFound,
    TooLarge,
    Unavailable,
    WaiError,
)


class ServiceError(WaiError):
    """an error of the HTTP service with no more specific code; ``headers`` go on the answer
    (``Retry-After`` is the ``retry_after_s`` of a busy or unavailable error)"""

    code = "service_error"

    def __init__(
        self, message: str, *, headers: Mapping[str, str] | None = None, **kind: Any
    ) -> None:
        super().__init__(message, **kind)
        self.headers = dict(headers or {})


class RequestInvalid(ServiceError, InvalidInput):
    """a query or path parameter that does not validate (names it)"""

    code = "request_invalid"


class RouteNotFound(ServiceError, NotFound):
    """no such route"""

    code = "not_found"


class MethodNotAllowed(ServiceError):
    """the route does not take that method"""

    code = "method_not_allowed"


class HttpError(ServiceError):
    """another HTTP-level refusal of the request (it keeps the status the HTTP layer gave it)"""

    code = "http_error"


class ClientDisconnected(ServiceError):
    """the client closed the connection before its request was read (logged and counted)"""

    code = "client_disconnected"


class InternalError(ServiceError, Internal):
    """a fault of the service, not the client's (logged with the request id)"""

    code = "internal_error"


class BodyTooLarge(ServiceError, TooLarge):
    """a request body over max_body_bytes (or the set archive limit)"""

    code = "body_too_large"


class ContentTypeUnsupported(ServiceError):
    """a body that is not application/json or application/cbor (or a set archive type)"""

    code = "content_type_unsupported"


class NotAcceptable(ServiceError):
    """an Accept header that allows neither application/json nor image/png"""

    code = "not_acceptable"


class QueueFull(ServiceError, Busy):
    """as many decodes running and queued as allowed: retry after Retry-After"""

    code = "queue_full"


class MemoryBusy(ServiceError, Busy):
    """decodes already admitted hold the memory budget: retry after Retry-After"""

    code = "memory_busy"


class BodiesBusy(ServiceError, Busy):
    """request bodies being read hold max_inflight_body_bytes: retry after Retry-After"""

    code = "bodies_busy"


class RequestTimeout(ServiceError):
    """a request whose headers or body did not arrive within header_timeout_s or body_timeout_s
    (the connection is closed)"""

    code = "request_timeout"


class DecodeTimeout(ServiceError, Unavailable):
    """a decode that ran past decode_timeout_s"""

    code = "decode_timeout"


class QueueTimeout(ServiceError, Unavailable):
    """a queued decode that could not start within decode_timeout_s: nothing ran or was
    stored; retry after Retry-After"""

    code = "queue_timeout"


class TokenMissing(ServiceError):
    """no Authorization: Bearer token"""

    code = "token_missing"


class TokenUnknown(ServiceError):
    """a bearer token that is not a live token"""

    code = "token_unknown"


class RoleForbidden(ServiceError, Forbidden):
    """a token whose role is below the route's"""

    code = "role_forbidden"


#: The status of each kind, and of the HTTP layer's own cases: an error is answered with the
#: status of its first class here in method-resolution order (Starlette's handler lookup).
STATUSES: tuple[tuple[type[WaiError], int], ...] = (
    (WaiError, 422),
    (InvalidInput, 422),
    (Malformed, 400),
    (TooLarge, 413),
    (NotFound, 404),
    (Forbidden, 403),
    (Conflict, 409),
    (Busy, 429),
    (Unavailable, 503),
    (Internal, 500),
    (TokenMissing, 401),
    (TokenUnknown, 401),
    (MethodNotAllowed, 405),
    (NotAcceptable, 406),
    (RequestTimeout, 408),
    (ContentTypeUnsupported, 415),
    (DecodeTimeout, 504),
    (ClientDisconnected, 400),
)


def status_of(error: type[WaiError]) -> int:
    """The status an error of this class is answered with (what the app's handlers give)."""
    statuses = dict(STATUSES)
    return next(statuses[c] for c in error.__mro__ if c in statuses)


def headers_of(error: WaiError) -> dict[str, str]:
    """The headers an error's answer carries: its own, and ``Retry-After`` when it has one."""
    headers = dict(error.headers) if isinstance(error, ServiceError) else {}
    if isinstance(error, (Busy, Unavailable)) and error.retry_after_s is not None:
        headers["Retry-After"] = str(error.retry_after_s)
    return headers


def error_body(request: Request, code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The body of every error answer: ``{"error": {"code", "message"}, "request_id", …}``.
    The message never names the server's data directory (a file's path in it is shown relative
    to ``<data_dir>``)."""
    return {
        "error": {"code": code, "message": scrub(request, message)},
        "request_id": request_id(request),
        **extra,
    }


def scrub(request: Request, message: str) -> str:
    """``message`` with the service's data directory (as configured and resolved) replaced by
    ``<data_dir>``: no server path reaches a client."""
    service = getattr(request.app.state, "service", None)
    if service is None:
        return message
    root = service.settings.data_dir
    for form in sorted({str(root), str(root.resolve())}, key=len, reverse=True):
        message = message.replace(form, "<data_dir>")
    return message


def request_id(request: Request) -> str:
    """The id the request-id middleware gave this request ("" before it ran)."""
    return str(request.scope.get("state", {}).get("request_id", ""))
