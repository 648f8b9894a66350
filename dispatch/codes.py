"""Every stable error code of wai-dispatch, with its HTTP status and its meaning: the one
enumeration that ``docs/errors.md`` lists (a test holds the two equal, status included) and every
raise site draws from. The service answers a code with its status (400–599; plain ints, so this
pure core imports nothing but the standard library); the CLI prints it and exits 2.

These are *errors* (a client's or user's mistake, or a decode that cannot happen), distinct
from the seven §7 refusal codes (:class:`dispatch.tokens.Code`), which are reasons inside a
report. No error code starts with ``dispatch_``: a dashboard that counts the spec's refusal
codes must never count an error among them.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """A stable error code: ``code.status`` is the HTTP status the service answers it with,
    ``code.meaning`` says what it means in one line."""

    status: int
    meaning: str

    def __new__(cls, value: str, status: int, meaning: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.meaning = meaning
        return member

    # the error tree's bases (dispatch/errors.py, codec/errors.py)
    WAI_ERROR = "wai_error", 422, "an error with no more specific code"
    CODEC_ERROR = "codec_error", 422, "bad input to the data layer with no more specific code"
    # dispatch: the pure core
    UNKNOWN_TOKEN = (
        "unknown_token",
        422,
        ("a unit, backend, arithmetic, tier or code token the vocabulary does not know"),
    )
    INVALID_OFFER = (
        "invalid_offer",
        422,
        ("an offer that is empty, repeats a path, or names an integer path on npu"),
    )
    INVALID_REPORT = (
        "invalid_report",
        422,
        ("a report that is malformed or contradicts §2–§5 (the message says which rule)"),
    )
    UNKNOWN_CAPABILITY = "unknown_capability", 422, "a capability the registry does not hold"
    # the decode as a whole
    DECODE_NO_PATH = (
        "decode_no_path",
        422,
        ("every offered path refused every decode the envelope allows (§4); the reports say why"),
    )
    # envelopes
    ENVELOPE_MALFORMED = (
        "envelope_malformed",
        400,
        (
            "not JSON, not CBOR, an empty file, a UTF-8 byte-order mark, duplicate keys, "
            "trailing bytes, or CBOR shared references that make a cycle"
        ),
    )
    ENVELOPE_INVALID = (
        "envelope_invalid",
        422,
        (
            "a member of the wrong type or missing (the message gives its location), bad "
            "base64, or an integer outside CBOR's 64-bit ones (a bignum)"
        ),
    )
    ENVELOPE_UNKNOWN_FIELD = (
        "envelope_unknown_field",
        422,
        "a member wai-envelope/1 does not define",
    )
    ENVELOPE_FORMAT_UNSUPPORTED = (
        "envelope_format_unsupported",
        422,
        ("a format other than wai-envelope/1"),
    )
    ENVELOPE_DUPLICATE_PIN = "envelope_duplicate_pin", 422, "two pins over one capability"
    ENVELOPE_PIN_CONFLICT = "envelope_pin_conflict", 422, "a part's set differs from its pin's set"
    ENVELOPE_TOO_LARGE = (
        "envelope_too_large",
        413,
        (
            "an envelope or its payload over Limits.max_envelope_bytes / max_payload_bytes, "
            "or CBOR shared references that expand it past the bytes read"
        ),
    )
    # payloads (WAIP/1) and the entropy stage
    PAYLOAD_INVALID = "payload_invalid", 422, "a payload with no more specific code"
    PAYLOAD_MAGIC = "payload_magic", 422, "the first four bytes are not WAIP"
    PAYLOAD_VERSION = "payload_version", 422, "a payload version other than 1"
    PAYLOAD_HEADER_INVALID = "payload_header_invalid", 422, "bad flags or header fields"
    PAYLOAD_TRUNCATED = "payload_truncated", 422, "fewer bytes than the header announces"
    PAYLOAD_TRAILING = "payload_trailing", 422, "more bytes than the header announces"
    PAYLOAD_TOO_LARGE = "payload_too_large", 413, "a payload over Limits.max_payload_bytes"
    PAYLOAD_SHAPE_OVER_LIMITS = (
        "payload_shape_over_limits",
        413,
        ("a latent shape over Limits, refused before anything is allocated"),
    )
    PAYLOAD_STREAM_INVALID = (
        "payload_stream_invalid",
        422,
        ("a rANS stream that does not decode to exactly the header's symbols"),
    )
    PAYLOAD_ESCAPE_INVALID = (
        "payload_escape_invalid",
        422,
        ("an escape section that does not decode to exactly the escaped symbols"),
    )
    PAYLOAD_TABLES_MISMATCH = (
        "payload_tables_mismatch",
        422,
        ("the header's channel count is not the tables'"),
    )
    SYMBOLS_INVALID = (
        "symbols_invalid",
        422,
        "symbols handed to the encoder of the wrong shape or type",
    )
    TABLES_INVALID = (
        "tables_invalid",
        422,
        "an entropy table that fails validation (names the channel)",
    )
    TABLES_UNSUPPORTED = "tables_unsupported", 422, "an entropy table format this build cannot read"
    COMPRESSAI_STREAM_INVALID = (
        "compressai_stream_invalid",
        422,
        ("a CompressAI bitstream file or rANS string that does not read"),
    )
    # parameter sets and the store
    SET_INVALID = "set_invalid", 422, "a parameter set with no more specific code"
    SET_MANIFEST_INVALID = "set_manifest_invalid", 422, "a set.json that does not validate"
    SET_FILE_MISMATCH = (
        "set_file_mismatch",
        422,
        ("a set file whose bytes differ from the manifest (names the file)"),
    )
    SET_DAMAGED = (
        "set_damaged",
        503,
        "an installed set whose files no longer match its manifest: a fault of the server's "
        "store, not of the request (503; names the file)",
    )
    SET_FILE_MISSING = (
        "set_file_missing",
        404,
        "a file the manifest lists is missing (names the file)",
    )
    SET_FILE_UNEXPECTED = (
        "set_file_unexpected",
        422,
        ("a file the manifest does not list (names the file)"),
    )
    SET_UNSAFE_ENTRY = (
        "set_unsafe_entry",
        422,
        ("an install refused: path traversal, a link, a device or another non-regular file"),
    )
    SET_TOO_LARGE = "set_too_large", 413, "an install over the store's size limits (413)"
    SET_ARCHIVE_INVALID = "set_archive_invalid", 422, "an archive that does not read"
    SET_DIGEST_INVALID = "set_digest_invalid", 422, "a set digest that is not 64 hex digits"
    SET_NOT_INSTALLED = "set_not_installed", 404, "a set digest that is not in the store"
    SET_AMBIGUOUS = "set_ambiguous", 409, "a default set that is not unique"
    SET_REGISTRY_DOWN = (
        "set_registry_down",
        503,
        "an install, removal or default of a set while the set registry (the report database) "
        "does not answer: nothing changed; retry (503)",
    )
    SET_NO_TABLES = "set_no_tables", 422, "a set whose manifest names no entropy tables file"
    SET_CAPABILITY_MISMATCH = (
        "set_capability_mismatch",
        422,
        ("a set of another capability than the one the decode or command names"),
    )
    SET_FACTS_MISMATCH = (
        "set_facts_mismatch",
        422,
        ("a set whose model or quality is not the one the input was coded with"),
    )
    PIN_MISMATCH = "pin_mismatch", 422, "the set's digest is not the pin's"
    DATA_DIR_INVALID = (
        "data_dir_invalid",
        422,
        ("a data directory that is empty, a file, or cannot be created or read"),
    )
    # the HTTP service (service/) and its client (cli/remote.py)
    SERVICE_ERROR = "service_error", 422, "an error of the HTTP service with no more specific code"
    SETTINGS_INVALID = (
        "settings_invalid",
        422,
        "a setting (environment, WAI_CONFIG file or flag) that does not validate",
    )
    REQUEST_INVALID = (
        "request_invalid",
        422,
        "a query or path parameter that does not validate (names it)",
    )
    NOT_FOUND = "not_found", 404, "no such route"
    METHOD_NOT_ALLOWED = "method_not_allowed", 405, "the route does not take that method"
    HTTP_ERROR = "http_error", 422, "another HTTP-level refusal of the request"
    CLIENT_DISCONNECTED = (
        "client_disconnected",
        400,
        "the client closed the connection before its request was read (logged and counted)",
    )
    INTERNAL_ERROR = (
        "internal_error",
        500,
        "a fault of the service, not the client's (500; logged with the request id)",
    )
    BODY_TOO_LARGE = (
        "body_too_large",
        413,
        "a request body over max_body_bytes (or the set archive limit)",
    )
    CONTENT_TYPE_UNSUPPORTED = (
        "content_type_unsupported",
        415,
        "a body that is not application/json or application/cbor (or a set archive type)",
    )
    NOT_ACCEPTABLE = (
        "not_acceptable",
        406,
        "an Accept header that allows neither application/json nor image/png",
    )
    LATENT_OVER_LIMIT = (
        "latent_over_limit",
        413,
        "a payload header whose latent (C×H×W) is over max_latent_elements",
    )
    DECODE_MEMORY_OVER_BUDGET = (
        "decode_memory_over_budget",
        413,
        "a decode whose memory estimate (from its payload header) is over memory_budget_bytes",
    )
    DECODE_TIME_OVER_LIMIT = (
        "decode_time_over_limit",
        413,
        "a decode whose time estimate (from its payload header) is over decode_timeout_s",
    )
    QUEUE_FULL = (
        "queue_full",
        429,
        "as many decodes running and queued as allowed: retry after Retry-After (429)",
    )
    MEMORY_BUSY = (
        "memory_busy",
        429,
        "decodes already admitted hold the memory budget: retry after Retry-After (429)",
    )
    REQUEST_TIMEOUT = (
        "request_timeout",
        408,
        "a request whose headers or body did not arrive within header_timeout_s or "
        "body_timeout_s (408; the connection is closed)",
    )
    BODIES_BUSY = (
        "bodies_busy",
        429,
        "request bodies being read hold max_inflight_body_bytes: retry after Retry-After (429)",
    )
    DECODE_TIMEOUT = "decode_timeout", 504, "a decode that ran past decode_timeout_s (504)"
    QUEUE_TIMEOUT = (
        "queue_timeout",
        503,
        "a queued decode that could not start within decode_timeout_s: nothing ran or was "
        "stored; retry after Retry-After (503)",
    )
    REPORT_SPOOL_FULL = (
        "report_spool_full",
        503,
        "the store is down and the spool is at spool_max_bytes: decodes wait (503)",
    )
    REPORT_SPOOL_FAILED = (
        "report_spool_failed",
        503,
        "the store is down and the spool cannot write (its disk is full): nothing was stored; "
        "retry after Retry-After (503)",
    )
    TOKEN_MISSING = "token_missing", 401, "no Authorization: Bearer token (401)"
    TOKEN_UNKNOWN = "token_unknown", 401, "a bearer token that is not a live token (401)"
    TOKEN_STORE_DOWN = (
        "token_store_down",
        503,
        "a bearer token this replica cannot check: the token store does not answer and the "
        "token is in no view this replica holds; retry after Retry-After (503, never 401)",
    )
    ROLE_FORBIDDEN = "role_forbidden", 403, "a token whose role is below the route's (403)"
    TOKEN_INVALID = "token_invalid", 422, "a token name or role that is not valid"
    TOKEN_NOT_FOUND = "token_not_found", 404, "no live token with that name or id"
    REPORT_NOT_FOUND = "report_not_found", 404, "no stored report with that id (or not this sink's)"
    CURSOR_INVALID = "cursor_invalid", 422, "a paging cursor this service did not give"
    REMOTE_ERROR = (
        "remote_error",
        422,
        "the service refused a decode --url or report --url without a more specific code (exit 4)",
    )
    REMOTE_UNREACHABLE = (
        "remote_unreachable",
        422,
        "decode --url or report --url could not reach the service, or it stayed busy after "
        "the retries (exit 3)",
    )
    REMOTE_INVALID = (
        "remote_invalid",
        422,
        "the service answered decode --url or report --url without JSON (exit 3)",
    )
    SET_PAYLOAD_INFO_INVALID = (
        "set_payload_info_invalid",
        422,
        (
            "a set whose payload_info file (default payload.json) is missing, not JSON, "
            "or states no symbols_digest"
        ),
    )
    # fleet governance: the model policy and run reports (service/governance/)
    POLICY_MALFORMED = (
        "policy_malformed",
        422,
        ("a model policy that does not read as YAML or JSON, or is over 1 MiB (gives the line)"),
    )
    POLICY_INVALID = (
        "policy_invalid",
        422,
        ("a model policy that breaks its schema or puts a sink in two classes (gives the line)"),
    )
    POLICY_NOT_SET = "policy_not_set", 404, "no model policy is in force, or no such policy version"
    RUN_REPORT_MALFORMED = (
        "run_report_malformed",
        422,
        ("a run report that is not JSON or lacks its id, sink or decodes list (names the member)"),
    )
    RUN_REPORT_SINK_MISMATCH = (
        "run_report_sink_mismatch",
        403,
        "a run report whose sink is not the submitting token's name",
    )
    RUN_REPORT_CONFLICT = (
        "run_report_conflict",
        409,
        "a run report id submitted before with another body",
    )
    RUN_REPORT_NOT_FOUND = (
        "run_report_not_found",
        404,
        "no stored run report with that id (or not this sink's)",
    )
    POLICY_BUSY = (
        "policy_busy",
        409,
        "the policy kept changing while this one was being set: a conflict; read it and "
        "retry (409)",
    )
    # wai-ops/1 integer programs (docs/wai-ops.md)
    WAIOPS_PROGRAM_INVALID = (
        "waiops_program_invalid",
        422,
        ("a wai-ops program that is not JSON or not a valid wai-ops/1 program"),
    )
    WAIOPS_UNKNOWN_OP = "waiops_unknown_op", 422, "an operation wai-ops/1 does not define"
    WAIOPS_UNKNOWN_ATTRIBUTE = (
        "waiops_unknown_attribute",
        422,
        ("an attribute or parameter the operation does not define, or one it needs missing"),
    )
    WAIOPS_WEIGHTS_MISMATCH = (
        "waiops_weights_mismatch",
        422,
        ("a weights tensor missing, extra, or of the wrong dtype, shape or values (named)"),
    )
    WAIOPS_BOUND_EXCEEDED = (
        "waiops_bound_exceeded",
        422,
        ("the bound rule broken: names the operation, the quantity and the bound"),
    )
    WAIOPS_INPUT_OUT_OF_RANGE = (
        "waiops_input_out_of_range",
        422,
        ("an input value outside the program's declared range"),
    )
    WAIOPS_SHAPE_OVER_LIMITS = (
        "waiops_shape_over_limits",
        422,
        ("an input shape over the decode's limits, or not [1, C, h, w]"),
    )
    # the browser page (service/web/page_files.py, service/web/page_files/)
    PAGE_NOT_FOUND = (
        "page_not_found",
        404,
        "a page file, sample or set route the page's site does not hold",
    )
    PAGE_BAD_REQUEST = (
        "page_bad_request",
        400,
        ("a page route's query (a latent shape, the browser's limits) that does not read"),
    )
    PAGE_FETCH_FAILED = (
        "page_fetch_failed",
        422,
        ("the page could not read a file from the service that serves it (names the route)"),
    )
    PAGE_ENTROPY_UNSUPPORTED = (
        "page_entropy_unsupported",
        422,
        (
            "the page cannot run this set's entropy stage (a hyperprior set's integer "
            "hyper-synthesis): the service or the CLI decodes it"
        ),
    )
    # the command line
    INVALID_ARGUMENT = (
        "invalid_argument",
        422,
        (
            "a command-line argument that is malformed, or a command line argparse refuses "
            "(no command, an unknown flag, a missing value); the usage follows on later lines"
        ),
    )
    TOOLS_MISSING = "tools_missing", 422, "a command that needs the tools extra, without it"
    RAY_MISSING = (
        "ray_missing",
        422,
        "`serve --ray` without the ray extra (pip install 'wai-dispatch[ray]')",
    )
    RAY_UNREACHABLE = (
        "ray_unreachable",
        422,
        "no Ray cluster answers at the address `serve --ray` names, or it refused the deployment",
    )
    STORE_NOT_SHARED = (
        "store_not_shared",
        422,
        "more than one replica (`serve --ray`) on a SQLite report store: a fleet shares PostgreSQL",
    )
    SET_WRITER_REFUSED = (
        "set_writer_refused",
        422,
        (
            "make-set refused the set: a checkpoint that does not read or is not the model, a "
            "check that does not hold; the output folder is left as it was"
        ),
    )
    # encode (docs/encode.md)
    PICTURE_INVALID = (
        "picture_invalid",
        422,
        "an encode input that is not a PNG, JPEG or PPM picture, or whose pixels do not decode",
    )
    PICTURE_OVER_LIMITS = (
        "picture_over_limits",
        413,
        (
            "a picture whose size (read from its header, before its pixels) the set's decode "
            "limits do not take; the limit is named"
        ),
    )
    ENCODE_UNSUPPORTED = (
        "encode_unsupported",
        422,
        "a set whose capability has no encoder in this build",
    )
    ENCODE_CHECKPOINT_MISMATCH = (
        "encode_checkpoint_mismatch",
        422,
        (
            "a checkpoint whose BLAKE3 is not the one the set's usage statement records (the "
            "set's synthesis was not written from it)"
        ),
    )
    ENCODE_CHECKPOINT_REQUIRED = (
        "encode_checkpoint_required",
        422,
        (
            "encode without --checkpoint for a set whose checkpoint is not at hand (not the "
            "bundled demo weights), or a checkpoint that does not read as the set's model"
        ),
    )
    ENCODE_SYMBOLS_OUT_OF_RANGE = (
        "encode_symbols_out_of_range",
        422,
        (
            "a quantized latent with a symbol outside the range the set's integer program "
            "declares (its decode would refuse it); the range is named"
        ),
    )
    IO_FAILED = (
        "io_failed",
        422,
        (
            "the system refused an operation no other code names (e.g. a full disk under the "
            "data directory); one line, never a traceback"
        ),
    )
    # a user's files (codec/files.py)
    FILE_UNREADABLE = (
        "file_unreadable",
        422,
        "a file named on the command line cannot be read (missing, no permission)",
    )
    FILE_NOT_REGULAR = (
        "file_not_regular",
        422,
        (
            "a folder, FIFO, device or socket named where a file belongs (checked before and "
            "after opening; never read)"
        ),
    )
    FILE_TOO_LARGE = (
        "file_too_large",
        422,
        "a file over the limit for what it holds, refused from its size before it is read",
    )
    FILE_UNWRITABLE = (
        "file_unwritable",
        422,
        (
            "an output that cannot be written (its folder is missing, it is a folder or a "
            "device, a file is in the way, the disk is full, the place is read-only); the "
            "target is left as it was"
        ),
    )
    OUTPUT_IS_INPUT = (
        "output_is_input",
        422,
        "an output path that names an input file (the same file, a link or a hard link to it)",
    )


def is_code(value: str) -> bool:
    """Whether ``value`` is a registered error code."""
    return value in ErrorCode._value2member_map_


def status_of(code: str) -> int:
    """The HTTP status of a registered ``code`` (a ``ValueError`` for any other string)."""
    member = ErrorCode._value2member_map_.get(code)
    if not isinstance(member, ErrorCode):
        raise ValueError(f"{code!r} is not in dispatch.codes.ErrorCode")
    return member.status
