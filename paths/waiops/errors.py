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


class WaiOpsError(WaiError, ValueError):
    """A ``wai-ops/1`` program, its weights or its input refused (bad input, never a bug)."""

    code = "waiops_program_invalid"


class UnknownOp(WaiOpsError):
    code = "waiops_unknown_op"


class UnknownAttribute(WaiOpsError):
    code = "waiops_unknown_attribute"


class WeightsMismatch(WaiOpsError):
    code = "waiops_weights_mismatch"


class BoundExceeded(WaiOpsError):
    code = "waiops_bound_exceeded"


class InputOutOfRange(WaiOpsError):
    code = "waiops_input_out_of_range"


class ShapeOverLimits(WaiOpsError):
    code = "waiops_shape_over_limits"
