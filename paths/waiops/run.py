"""What every ``wai-ops/1`` interpreter checks of its input before anything runs: the shape
``[1, C, h, w]`` within the decode's limits, integer values, every value in the declared range."""

from __future__ import annotations

import numpy as np

from wai_dispatch.paths.waiops.errors import InputOutOfRange, InputShapeOverLimits
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.setfacts.limits import Limits

_DEFAULT_LIMITS = Limits()


def check_input(
    program: Program, symbols: np.ndarray | None, limits: Limits | None = None
) -> np.ndarray:
    """``symbols`` as int32 [1, C, h, w], or a typed refusal (shape, limits, dtype, range);
    ``None`` (a job without symbols) is refused as a wrong shape."""
    limits = limits or _DEFAULT_LIMITS
    x = np.asarray(symbols)
    if x.ndim != 4 or x.shape[0] != 1 or x.shape[1] != program.input_channels:
        raise InputShapeOverLimits(
            f"wai-ops input has shape {list(x.shape)}, not [1, {program.input_channels}, h, w]"
        )
    h, w = int(x.shape[2]), int(x.shape[3])
    if not (1 <= h <= limits.max_latent_height and 1 <= w <= limits.max_latent_width):
        raise InputShapeOverLimits(
            f"wai-ops input of {h}×{w} positions is over the limits "
            f"({limits.max_latent_height}×{limits.max_latent_width})"
        )
    _check_shapes(program, h, w)
    if not np.issubdtype(x.dtype, np.integer):
        raise InputOutOfRange(f"wai-ops input is {x.dtype}, not integers")
    lo, hi = program.input_range
    if x.size and (int(x.min()) < lo or int(x.max()) > hi):
        bad = int(x.min()) if int(x.min()) < lo else int(x.max())
        raise InputOutOfRange(
            f"wai-ops input value {bad} is outside the program's declared range [{lo}, {hi}]"
        )
    return x.astype(np.int32, copy=False)


def _check_shapes(program: Program, h: int, w: int) -> None:
    """Every operation's output at least 1 × 1 for this input (a convolution without padding
    can shrink a small input to nothing)."""
    sizes = {program.input_name: (h, w)}
    for op in program.operations:
        ih, iw = sizes[op.inputs[0]]
        a = op.attrs
        if op.op == "conv2d":
            oh, ow = (
                ih + 2 * a["padding"] - a["kernel"] + 1,
                iw + 2 * a["padding"] - a["kernel"] + 1,
            )
        elif op.op == "conv_transpose2d":
            grow = -2 * a["padding"] + a["kernel"] + a["output_padding"]
            oh, ow = (ih - 1) * a["stride"] + grow, (iw - 1) * a["stride"] + grow
        else:
            oh, ow = ih, iw
        if oh < 1 or ow < 1:
            raise InputShapeOverLimits(f"{op.name}: an input of {h}×{w} positions leaves {oh}×{ow}")
        sizes[op.output] = (oh, ow)
