"""The typed errors of fleet governance: a model policy or a run report that cannot be read.

A run report that reads but breaks the policy is not an error: it is a verdict that refuses it
(:mod:`.judge`), with a reason per decode and rule.
"""

from __future__ import annotations

from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.governance.codes import GovernanceCode


class PolicyMalformed(WaiError, ValueError):
    code = GovernanceCode.POLICY_MALFORMED


class PolicyInvalid(WaiError, ValueError):
    code = GovernanceCode.POLICY_INVALID


class PolicyNotSet(WaiError, LookupError):
    code = GovernanceCode.POLICY_NOT_SET


class RunReportMalformed(WaiError, ValueError):
    code = GovernanceCode.RUN_REPORT_MALFORMED
