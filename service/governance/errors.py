"""The typed errors of fleet governance: a model policy or a run report that cannot be read.

A run report that reads but breaks the policy is not an error: it is a verdict that refuses it
(:mod:`.judge`), with a reason per decode and rule.
"""

from __future__ import annotations

from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError


class PolicyMalformed(WaiError, ValueError):
    code = ErrorCode.POLICY_MALFORMED


class PolicyInvalid(WaiError, ValueError):
    code = ErrorCode.POLICY_INVALID


class PolicyNotSet(WaiError, LookupError):
    code = ErrorCode.POLICY_NOT_SET


class RunReportMalformed(WaiError, ValueError):
    code = ErrorCode.RUN_REPORT_MALFORMED
