"""Every stable error code the service can answer with, mapped to its HTTP status in one
table, and the service's own errors (limits, auth, the request body).

A client's mistake is a 4xx carrying ``{"error": {"code", "message"}}``; a code missing from
:data:`STATUS` answers 422 when it is a :class:`WaiError` of the data layer, never 500.
"""

from __future__ import annotations

from wai_dispatch.dispatch.errors import WaiError


class ServiceError(WaiError):
    """An error of the service itself; ``headers`` go on the answer (e.g. ``Retry-After``)."""

    code = "service_error"

    def __init__(
        self, message: str, *, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.headers = headers or {}


#: code → HTTP status. Prefixes (``envelope_``, ``payload_``, ``set_``) cover their families
#: unless a code is listed itself.
STATUS: dict[str, int] = {
    # the request
    "body_too_large": 413,
    "content_type_unsupported": 415,
    "not_acceptable": 406,
    "envelope_malformed": 400,
    "envelope_too_large": 413,
    "envelope_": 422,
    "payload_too_large": 413,
    "payload_shape_over_limits": 413,
    "payload_": 422,
    "symbols_invalid": 422,
    "tables_": 422,
    "unknown_capability": 422,
    "unknown_token": 422,
    "invalid_offer": 422,
    "invalid_report": 422,
    "pin_mismatch": 422,
    "set_capability_mismatch": 422,
    "set_not_installed": 404,
    "set_digest_invalid": 422,
    "set_ambiguous": 409,
    "set_": 422,
    "decode_no_path": 422,
    # the limits
    "latent_over_limit": 413,
    "decode_memory_over_budget": 413,
    "decode_time_over_limit": 413,
    "queue_full": 429,
    "memory_busy": 429,
    "decode_timeout": 504,
    "report_spool_full": 503,
    # auth
    "token_missing": 401,
    "token_unknown": 401,
    "role_forbidden": 403,
    "token_invalid": 422,
    "token_not_found": 404,
    # the API
    "report_not_found": 404,
    # fleet governance (service/store/policies.py)
    "policy_malformed": 422,
    "policy_invalid": 422,
    "policy_not_set": 404,
    "run_report_malformed": 422,
    "run_report_sink_mismatch": 403,
    "run_report_conflict": 409,
    "run_report_not_found": 404,
    "policy_busy": 503,
    "cursor_invalid": 422,
    "request_invalid": 422,
    "not_found": 404,
    "method_not_allowed": 405,
}


def http_status(code: str) -> int:
    """The status of ``code``: its own entry, else its family's, else 422."""
    if code in STATUS:
        return STATUS[code]
    for prefix, status in STATUS.items():
        if prefix.endswith("_") and code.startswith(prefix):
            return status
    return 422
