"""Fleet governance (§5, last paragraph): the operator's model policy, the run reports fleet
sinks submit, and the pure function that judges one against the other. Needs no web framework,
so the CLI judges offline what the service judges on arrival."""

from __future__ import annotations

from wai_dispatch.service.governance.errors import (
    PolicyInvalid,
    PolicyMalformed,
    PolicyNotSet,
    RunReportMalformed,
)
from wai_dispatch.service.governance.judge import Rule, Verdict, judge
from wai_dispatch.service.governance.policy import Policy, PolicyVersion, load_policy
from wai_dispatch.service.governance.runreport import RunReport, loads_run_report, parse_run_report

__all__ = [
    "Policy",
    "PolicyInvalid",
    "PolicyMalformed",
    "PolicyNotSet",
    "PolicyVersion",
    "Rule",
    "RunReport",
    "RunReportMalformed",
    "Verdict",
    "judge",
    "load_policy",
    "loads_run_report",
    "parse_run_report",
]
