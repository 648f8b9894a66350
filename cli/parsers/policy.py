"""The parsers of ``policy show|set|check`` (run by :mod:`cli.policy`)."""

from __future__ import annotations

from pathlib import Path

from wai_dispatch.cli.flags import STDIO, Sub, command, runs, verb_options


def add(sub: Sub) -> None:
    common = verb_options("the data directory, whose report store keeps the policy")
    p = command(
        sub,
        "policy",
        "wai-dispatch policy set policy.yaml\nwai-dispatch policy check run-report.json",
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    v = command(
        verbs,
        "show",
        "wai-dispatch policy show --history",
        help="the policy in force, or its history",
        parents=[common],
    )
    v.add_argument("--version", type=int, metavar="N", help="show version N instead")
    v.add_argument("--history", action="store_true", help="list every version: who and when")
    runs(v, "policy:run_show")

    v = command(
        verbs,
        "set",
        f"wai-dispatch policy set policy.yaml\ncat policy.yaml | wai-dispatch policy set {STDIO}",
        help="validate a policy and keep it in force",
        parents=[common],
    )
    v.add_argument(
        "file", type=Path, help=f"a wai-model-policy/1 file (YAML or JSON; {STDIO}: stdin)"
    )
    v.add_argument("--by", help="who sets it (default: the login name)")
    runs(v, "policy:run_set")

    v = command(
        verbs,
        "check",
        "wai-dispatch policy check run-report.json --policy policy.yaml",
        help="judge a run report offline (exit 0 accepted, 1 refused)",
        parents=[common],
    )
    v.add_argument(
        "run_report",
        type=Path,
        metavar="RUNREPORT",
        help=f"a wai-run-report/1 file ({STDIO}: stdin)",
    )
    v.add_argument("--policy", type=Path, metavar="FILE", help="this policy, not the one in force")
    runs(v, "policy:run_check")
