"""The service's own errors (limits, auth, the request body).

A client's mistake is a 4xx carrying ``{"error": {"code", "message"}}``; the status of every
code is the registry's (``dispatch.codes.ErrorCode.status``), never a table here.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError


class ServiceError(WaiError):
    """An error of the service itself; ``headers`` go on the answer (e.g. ``Retry-After``)."""

    code = ErrorCode.SERVICE_ERROR

    def __init__(
        self, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.headers = headers or {}


def error_body(request: Request, code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The body of every error answer: ``{"error": {"code", "message"}, "request_id", …}``."""
    return {"error": {"code": code, "message": message}, "request_id": request_id(request), **extra}


def request_id(request: Request) -> str:
    """The id the request-id middleware gave this request ("" before it ran)."""
    return str(request.scope.get("state", {}).get("request_id", ""))
