"""Typed errors of ``wai-ops/1`` programs: each a stable code (docs/wai-ops.md, docs/errors.md).

WaiOpsError                 waiops_program_invalid (base)
├── UnknownOp               waiops_unknown_op
├── UnknownAttribute        waiops_unknown_attribute
├── WeightsMismatch         waiops_weights_mismatch
├── BoundExceeded           waiops_bound_exceeded
├── InputOutOfRange         waiops_input_out_of_range
└── InputShapeOverLimits    waiops_shape_over_limits
"""

from __future__ import annotations

from wai_dispatch.dispatch.errors import InvalidInput


class WaiOpsError(InvalidInput):
    """a wai-ops program that is not JSON or not a valid wai-ops/1 program (docs/wai-ops.md)"""

    code = "waiops_program_invalid"


class UnknownOp(WaiOpsError):
    """an operation wai-ops/1 does not define"""

    code = "waiops_unknown_op"


class UnknownAttribute(WaiOpsError):
    """an attribute or parameter the operation does not define, or one it needs missing"""

    code = "waiops_unknown_attribute"


class WeightsMismatch(WaiOpsError):
    """a weights tensor missing, extra, or of the wrong dtype, shape or values (named)"""

    code = "waiops_weights_mismatch"


class BoundExceeded(WaiOpsError):
    """the bound rule broken: names the operation, the quantity and the bound"""

    code = "waiops_bound_exceeded"


class InputOutOfRange(WaiOpsError):
    """an input value outside the program's declared range"""

    code = "waiops_input_out_of_range"


class InputShapeOverLimits(WaiOpsError):
    """an input shape over the decode's limits, or not [1, C, h, w]"""

    code = "waiops_shape_over_limits"
