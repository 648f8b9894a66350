"""The parser of ``reports prune`` (run by :mod:`cli.reports`)."""

from __future__ import annotations

from wai_dispatch.cli.flags import Sub, add_data_dir, add_json, command, runs, setting_flags


def add(sub: Sub) -> None:
    p = command(
        sub, "reports", "wai-dispatch reports prune\nwai-dispatch reports prune --days 7 --json"
    )
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    v = command(
        verbs,
        "prune",
        "wai-dispatch reports prune --days 7",
        help="delete reports (and roll-ups) past their retention",
    )
    add_json(v)
    add_data_dir(v)
    v.add_argument(
        "--days",
        type=int,
        metavar="N",
        dest="report_retention_days",
        help="keep N days of reports (default WAI_REPORT_RETENTION_DAYS, 30; 0: keep all)",
    )
    v.add_argument(
        "--rollup-days",
        type=int,
        metavar="N",
        dest="rollup_retention_days",
        help="keep N days of roll-ups (default WAI_ROLLUP_RETENTION_DAYS, 0: keep all)",
    )
    v.add_argument("--batch", type=int, default=2000, help="reports per transaction")
    setting_flags(v, "report_retention_days", "rollup_retention_days")
    runs(v, "reports:run_prune")
