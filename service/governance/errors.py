"""The typed errors of fleet governance: a model policy or a run report that cannot be read.

A run report that reads but breaks the policy is not an error: it is a verdict that refuses it
(:mod:`.judge`), with a reason per decode and rule.
"""

from __future__ import annotations

from wai_dispatch.dispatch.errors import InvalidInput, NotFound


class PolicyMalformed(InvalidInput):
    """a model policy that does not read as YAML or JSON, or is over 1 MiB (gives the line)"""

    code = "policy_malformed"


class PolicyInvalid(InvalidInput):
    """a model policy that breaks its schema or puts a sink in two classes (gives the line)"""

    code = "policy_invalid"


class PolicyNotSet(NotFound):
    """no model policy is in force, or no such policy version"""

    code = "policy_not_set"


class RunReportMalformed(InvalidInput):
    """a run report that is not JSON or lacks its id, sink or decodes list (names the member)"""

    code = "run_report_malformed"
