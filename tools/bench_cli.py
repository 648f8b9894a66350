"""Benchmark the command line's start: every command's ``--help`` in a fresh interpreter beside
the anchor ``python -c pass``, against docs/cli.md's 0.3 s budget; and ``decode --url`` and
``report --url`` to their error line on an unreachable URL, against twice the anchor. Rows give
the best wall and CPU (user + system) time and both as multiples of the anchor's."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from collections.abc import Sequence

from wai_dispatch.cli.flags import COMMANDS
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.tools.harness import parser, table

BUDGET_S = 0.3
#: The sink's client: at most this many times the anchor (docs/cli.md).
CLIENT_BUDGET = 2.0
UNREACHABLE = "http://127.0.0.1:9/"  # the discard port: nothing listens


def fastest_run(argv: list[str], repeats: int) -> tuple[float, float]:
    """The fastest of ``repeats`` runs of ``argv``: (wall seconds, CPU seconds), output
    discarded."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall = min(wall, time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # microseconds, not clock ticks
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        cpu = min(cpu, used)
    return wall, cpu


def main(argv: Sequence[str] | None = None) -> int:
    args = parser("cli", __doc__, repeats=5).parse_args(argv)
    cli = [sys.executable, "-m", "wai_dispatch.cli"]
    anchor, anchor_cpu = fastest_run([sys.executable, "-c", "pass"], args.repeats)
    sample = str(envelopes_dir() / "bmshj2018-demo-q3.json")
    commands = [("--help", [*cli, "--help"])]
    commands += [(f"{name} --help", [*cli, name, "--help"]) for name in COMMANDS]  # the table's
    client = {
        "decode --url (unreachable) --retries 0": ["decode", sample, "--url", UNREACHABLE],
        "report --url (unreachable) --retries 0": ["report", sample, "--url", UNREACHABLE],
    }
    commands += [(label, [*cli, *line, "--retries", "0"]) for label, line in client.items()]
    rows: list[list[object]] = [["python -c pass (the anchor)", anchor * 1e3, anchor_cpu * 1e3]]
    rows[0] += [1.0, 1.0, ""]
    worst = 0.0
    for label, command in commands:
        took, cpu = fastest_run(command, args.repeats)
        if label in client:  # the sink's client: the better of its two multiples
            ok = min(took / anchor, cpu / anchor_cpu) <= CLIENT_BUDGET
            budget = f"{'within' if ok else 'OVER'} {CLIENT_BUDGET:g}×"
        else:
            worst, budget = max(worst, took), f"{BUDGET_S * 1000:.0f} ms"
        rows.append([f"wai-dispatch {label}", took * 1e3, cpu * 1e3, took / anchor])
        rows[-1] += [cpu / anchor_cpu, budget]
    head = ["", "wall ms", "cpu ms", "wall ×anchor", "cpu ×anchor", "budget"]
    table(head, rows, "- .1f .1f .1f .1f")
    print(f"slowest: {worst * 1000:.1f} ms {'within' if worst < BUDGET_S else 'OVER'} the budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
