"""Typed errors of ``wai-ops/1`` programs: each a stable code (docs/wai-ops.md, docs/errors.md).

WaiOpsError                 waiops_program_invalid (base)
├── UnknownOp               waiops_unknown_op
├── UnknownAttribute        waiops_unknown_attribute
├── WeightsMismatch         waiops_weights_mismatch
├── BoundExceeded           waiops_bound_exceeded
├── InputOutOfRange         waiops_input_out_of_range
└── ShapeOverLimits         waiops_shape_over_limits
"""

from __future__ import annotations

from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.paths.codes import PathsCode


class WaiOpsError(WaiError, ValueError):
    """A ``wai-ops/1`` program, its weights or its input refused (bad input, never a bug)."""

    code = PathsCode.WAIOPS_PROGRAM_INVALID


class UnknownOp(WaiOpsError):
    code = PathsCode.WAIOPS_UNKNOWN_OP


class UnknownAttribute(WaiOpsError):
    code = PathsCode.WAIOPS_UNKNOWN_ATTRIBUTE


class WeightsMismatch(WaiOpsError):
    code = PathsCode.WAIOPS_WEIGHTS_MISMATCH


class BoundExceeded(WaiOpsError):
    code = PathsCode.WAIOPS_BOUND_EXCEEDED


class InputOutOfRange(WaiOpsError):
    code = PathsCode.WAIOPS_INPUT_OUT_OF_RANGE


class ShapeOverLimits(WaiOpsError):
    code = PathsCode.WAIOPS_SHAPE_OVER_LIMITS
