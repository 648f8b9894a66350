"""Typed errors of the data layer, and the check of a latent shape against the decode's limits
(:class:`setfacts.limits.Limits`: what a header may ask for).

Every error here is a :class:`dispatch.WaiError` with a stable ``code``: the CLI prints it on
one line and the service answers 4xx with it. Modules of ``codec`` subclass :class:`CodecError`
with codes of their own and list them in docs/errors.md.
"""

from __future__ import annotations

from wai_dispatch.codec.codes import CodecCode
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.setfacts.limits import Limits


class CodecError(WaiError, ValueError):
    """Bad input to the data layer: an envelope, a payload, a table or a parameter set."""

    code: str = CodecCode.CODEC_ERROR


class ShapeOverLimits(CodecError):
    """A latent shape over :class:`Limits`, refused before anything is allocated."""

    code = CodecCode.PAYLOAD_SHAPE_OVER_LIMITS


def check_latent_shape(shape: tuple[int, ...], limits: Limits, *, what: str = "latent") -> None:
    """Refuse a latent shape (N×C×H×W, or C×H×W) over ``limits`` before anything of that size
    is allocated (the CompressAI import and a plan ask this; the payload reader checks the same
    bounds on its header)."""
    dims = tuple(shape)
    if len(dims) == 4:
        dims = dims[1:] if dims[0] == 1 else (dims[0] * dims[1], *dims[2:])
    if len(dims) != 3:
        raise CodecError(
            f"{what} shape {tuple(shape)} is not N×C×H×W", code=CodecCode.INVALID_ARGUMENT
        )
    channels, height, width = dims
    if min(dims) <= 0:
        raise CodecError(
            f"{what} shape {tuple(shape)} has a dimension under 1", code=CodecCode.INVALID_ARGUMENT
        )
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
