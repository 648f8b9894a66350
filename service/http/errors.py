"""The service's own errors (limits, auth, the request body).

A client's mistake is a 4xx carrying ``{"error": {"code", "message"}}``; the status of every
code is the HTTP layer's one table (service/http/statuses.py), assigned nowhere else.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.store.codes import StoreCode


class ServiceError(WaiError):
    """An error of the service itself; ``headers`` go on the answer (e.g. ``Retry-After``)."""

    code = StoreCode.SERVICE_ERROR

    def __init__(
        self, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.headers = headers or {}


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
