"""The payload's errors (§6.3, docs/payload.md), shared by the ``WAIP`` payload
(:mod:`codec.payload`), the ``WAIH`` payload (:mod:`codec.hyperprior_payload`) and the picture
size field both carry (:mod:`codec.picture_size`); each a :class:`codec.errors.CodecError` with a
stable ``code``::

    PayloadError               payload_invalid (base)
    ├── PayloadFormatError     payload_magic, payload_version, payload_header_invalid
    ├── PayloadLengthError     payload_truncated, payload_trailing
    ├── PayloadLimitError      payload_too_large, payload_shape_over_limits
    ├── PayloadStreamError     payload_stream_invalid, payload_escape_invalid
    └── PayloadTablesMismatch  payload_tables_mismatch
    SymbolsError               symbols_invalid (bad input to encode, symbols_digest, latent)
"""

from __future__ import annotations

from wai_dispatch.codec.codes import CodecCode
from wai_dispatch.codec.errors import CodecError

__all__ = [
    "PayloadError",
    "PayloadFormatError",
    "PayloadLengthError",
    "PayloadLimitError",
    "PayloadStreamError",
    "PayloadTablesMismatch",
    "SymbolsError",
]


class PayloadError(CodecError):
    code = CodecCode.PAYLOAD_INVALID


class PayloadFormatError(PayloadError):
    """Not a payload of this format: magic, version, reserved bits, zero dimensions."""

    code = CodecCode.PAYLOAD_HEADER_INVALID


class PayloadLengthError(PayloadError):
    """Fewer or more bytes than the header declares."""

    code = CodecCode.PAYLOAD_TRUNCATED


class PayloadLimitError(PayloadError):
    """Bytes or a shape over :class:`Limits`, refused before anything is allocated."""

    code = CodecCode.PAYLOAD_TOO_LARGE


class PayloadStreamError(PayloadError):
    """The stream does not decode to exactly the header's symbols, or a bad escape section."""

    code = CodecCode.PAYLOAD_STREAM_INVALID


class PayloadTablesMismatch(PayloadError):
    code = CodecCode.PAYLOAD_TABLES_MISMATCH


class SymbolsError(CodecError):
    code = CodecCode.SYMBOLS_INVALID
