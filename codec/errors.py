"""Typed errors of the data layer, and the check of a latent shape against the decode's limits
(:class:`setfacts.limits.Limits`: what a header may ask for). Each class names its stable
``code`` and, as its docstring, the code's meaning (docs/errors.md is generated from them).
The payload's errors (§6.3, docs/payload.md) are shared by the ``WAIP`` payload
(:mod:`codec.payload`), the ``WAIH`` payload (:mod:`codec.hyperprior_payload`) and the picture
size field both carry (:mod:`codec.picture_size`)::

    CodecError                 codec_error (InvalidInput)
    ├── PayloadError           (base)
    │   ├── PayloadFormatError payload_header_invalid; PayloadMagic, PayloadVersion
    │   ├── PayloadLengthError payload_truncated; PayloadTrailing
    │   ├── PayloadLimitError  payload_too_large; ShapeOverLimits (TooLarge)
    │   ├── PayloadStreamError payload_stream_invalid; PayloadEscapeInvalid
    │   └── PayloadTablesMismatch  payload_tables_mismatch
    └── SymbolsError           symbols_invalid (bad input to encode, symbols_digest, latent)
"""

from __future__ import annotations

from wai_dispatch.dispatch.errors import InvalidArgument, InvalidInput, TooLarge
from wai_dispatch.setfacts.limits import Limits


class CodecError(InvalidInput):
    """bad input to the data layer with no more specific code"""

    code = "codec_error"


class PayloadError(CodecError):
    """A payload that does not read (each subclass names how)."""


class PayloadFormatError(PayloadError):
    """bad flags or header fields"""

    code = "payload_header_invalid"


class PayloadMagic(PayloadFormatError):
    """the first four bytes are not the set's payload magic (WAIP, or WAIH for a hyperprior set)"""

    code = "payload_magic"


class PayloadVersion(PayloadFormatError):
    """a payload version other than 1 and 2"""

    code = "payload_version"


class PayloadLengthError(PayloadError):
    """fewer bytes than the header announces"""

    code = "payload_truncated"


class PayloadTrailing(PayloadLengthError):
    """more bytes than the header announces"""

    code = "payload_trailing"


class PayloadLimitError(TooLarge, PayloadError):
    """a payload over Limits.max_payload_bytes"""

    code = "payload_too_large"


class ShapeOverLimits(PayloadLimitError):
    """a latent shape over Limits, refused before anything is allocated"""

    code = "payload_shape_over_limits"


class PayloadStreamError(PayloadError):
    """a rANS stream that does not decode to exactly the header's symbols"""

    code = "payload_stream_invalid"


class PayloadEscapeInvalid(PayloadStreamError):
    """an escape section that does not decode to exactly the escaped symbols"""

    code = "payload_escape_invalid"


class PayloadTablesMismatch(PayloadError):
    """the header's channel count is not the tables'"""

    code = "payload_tables_mismatch"


class SymbolsError(CodecError):
    """symbols handed to the encoder of the wrong shape or type"""

    code = "symbols_invalid"


def check_latent_shape(shape: tuple[int, ...], limits: Limits, *, what: str = "latent") -> None:
    """Refuse a latent shape (N×C×H×W, or C×H×W) over ``limits`` before anything of that size
    is allocated (both payload readers ask this of their header, as do the CompressAI import
    and a plan)."""
    dims = tuple(shape)
    if len(dims) == 4:
        dims = dims[1:] if dims[0] == 1 else (dims[0] * dims[1], *dims[2:])
    if len(dims) != 3:
        raise InvalidArgument(f"{what} shape {tuple(shape)} is not N×C×H×W")
    channels, height, width = dims
    if min(dims) <= 0:
        raise InvalidArgument(f"{what} shape {tuple(shape)} has a dimension under 1")
    if (
        channels > limits.max_channels
        or height > limits.max_latent_height
        or width > limits.max_latent_width
        or channels * height * width > limits.max_symbols
    ):
        raise ShapeOverLimits(
            f"{what} shape {tuple(shape)} exceeds the limits ({limits.max_channels} channels, "
            f"{limits.max_latent_height} x {limits.max_latent_width}, "
            f"{limits.max_symbols} symbols)"
        )
