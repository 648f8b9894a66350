"""The HTTP status of every error code, assigned here, in the HTTP layer: the layers that raise
the codes (each declares its own, beside its code: ``codes.py``) know nothing of HTTP. The
service answers a ``WaiError`` with its code's status (:func:`status_of`): 4xx for a client's
mistake, 5xx for a fault of the service or a dependency it waits on. Keyed by the codes'
strings, so that this table needs no layer above HTTP (the page's, the CLI's); the registry's
test (tests/dispatch/test_error_codes.py) holds its keys to exactly the registered codes."""

from __future__ import annotations

__all__ = ["STATUS", "status_of"]

STATUS: dict[str, int] = {
    # dispatch (dispatch/codes.py)
    "wai_error": 422,
    "unknown_token": 422,
    "invalid_offer": 422,
    "invalid_report": 422,
    "unknown_capability": 422,
    # codec (codec/codes.py)
    "codec_error": 422,
    "envelope_malformed": 400,
    "envelope_invalid": 422,
    "envelope_unknown_field": 422,
    "envelope_format_unsupported": 422,
    "envelope_duplicate_pin": 422,
    "envelope_pin_conflict": 422,
    "envelope_too_large": 413,
    "payload_invalid": 422,
    "payload_magic": 422,
    "payload_version": 422,
    "payload_header_invalid": 422,
    "payload_truncated": 422,
    "payload_trailing": 422,
    "payload_too_large": 413,
    "payload_shape_over_limits": 413,
    "payload_stream_invalid": 422,
    "payload_escape_invalid": 422,
    "payload_tables_mismatch": 422,
    "symbols_invalid": 422,
    "tables_invalid": 422,
    "tables_unsupported": 422,
    "compressai_stream_invalid": 422,
    "compressai_hyperprior_unsupported": 422,
    "set_invalid": 422,
    "set_manifest_invalid": 422,
    "set_file_mismatch": 422,
    "set_damaged": 503,
    "set_file_missing": 404,
    "set_file_unexpected": 422,
    "set_unsafe_entry": 422,
    "set_too_large": 413,
    "set_archive_invalid": 422,
    "set_digest_invalid": 422,
    "set_not_installed": 404,
    "set_ambiguous": 409,
    "set_no_tables": 422,
    "set_capability_mismatch": 422,
    "pin_mismatch": 422,
    "data_dir_invalid": 422,
    "invalid_argument": 422,
    "picture_invalid": 422,
    "picture_over_limits": 413,
    "file_unreadable": 422,
    "file_not_regular": 422,
    "file_too_large": 422,
    "file_unwritable": 422,
    "output_is_input": 422,
    # paths (paths/codes.py)
    "waiops_program_invalid": 422,
    "waiops_unknown_op": 422,
    "waiops_unknown_attribute": 422,
    "waiops_weights_mismatch": 422,
    "waiops_bound_exceeded": 422,
    "waiops_input_out_of_range": 422,
    "waiops_shape_over_limits": 422,
    # service.decoding (service/decoding/codes.py)
    "decode_no_path": 422,
    "set_facts_mismatch": 422,
    "settings_invalid": 422,
    "latent_over_limit": 413,
    "decode_memory_over_budget": 413,
    "decode_time_over_limit": 413,
    "set_payload_info_invalid": 422,
    # service.governance (service/governance/codes.py)
    "policy_malformed": 422,
    "policy_invalid": 422,
    "policy_not_set": 404,
    "run_report_malformed": 422,
    # service.store (service/store/codes.py)
    "set_registry_down": 503,
    "service_error": 422,
    "report_spool_full": 503,
    "report_spool_failed": 503,
    "token_invalid": 422,
    "token_not_found": 404,
    "report_not_found": 404,
    "cursor_invalid": 422,
    "run_report_sink_mismatch": 403,
    "run_report_conflict": 409,
    "run_report_not_found": 404,
    "request_id_reused": 422,
    "request_in_flight": 409,
    "policy_busy": 409,
    # service.http (service/http/codes.py)
    "request_invalid": 422,
    "not_found": 404,
    "method_not_allowed": 405,
    "http_error": 422,
    "client_disconnected": 400,
    "internal_error": 500,
    "body_too_large": 413,
    "content_type_unsupported": 415,
    "not_acceptable": 406,
    "queue_full": 429,
    "memory_busy": 429,
    "request_timeout": 408,
    "bodies_busy": 429,
    "decode_timeout": 504,
    "queue_timeout": 503,
    "token_missing": 401,
    "token_unknown": 401,
    "token_store_down": 503,
    "role_forbidden": 403,
    # service.web (service/web/codes.py)
    "page_not_found": 404,
    "page_bad_request": 400,
    "page_fetch_failed": 422,
    # service.rayserve (service/rayserve/codes.py)
    "store_not_shared": 422,
    # cli (cli/codes.py)
    "remote_error": 422,
    "remote_unreachable": 422,
    "remote_invalid": 422,
    "tools_missing": 422,
    "ray_missing": 422,
    "ray_unreachable": 422,
    "io_failed": 422,
    "store_down": 503,
    # tools (tools/codes.py)
    "set_writer_refused": 422,
    "encode_unsupported": 422,
    "encode_checkpoint_mismatch": 422,
    "encode_checkpoint_required": 422,
    "encode_symbols_out_of_range": 422,
}


def status_of(code: str) -> int:
    """The HTTP status of ``code`` (a ``ValueError`` for a string no layer registers)."""
    try:
        return STATUS[code]
    except KeyError:
        raise ValueError(f"{code!r} is not a registered error code") from None
