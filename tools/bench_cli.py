"""Benchmark the command line's start: ``wai-dispatch --help`` and every command's ``--help``
(each a fresh interpreter, best of ``--repeats``), beside the anchor ``python -c pass`` (the
interpreter's own start, measured in the same run), against the 0.3 s budget of docs/cli.md.

    python -m wai_dispatch.tools.bench_cli [--repeats N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence

from wai_dispatch.cli.main import COMMANDS

BUDGET_S = 0.3


def best_of(argv: list[str], repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``argv`` (wall seconds, output discarded)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - start)
    return best


def commands() -> list[str]:
    """The commands ``--help`` lists (read from the CLI's table, not its modules)."""

    return list(COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_cli")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    cli = [sys.executable, "-m", "wai_dispatch.cli"]
    anchor = best_of([sys.executable, "-c", "pass"], args.repeats)
    print(f"anchor: python -c pass                          {anchor * 1000:7.1f} ms")
    rows = [("--help", [*cli, "--help"])]
    rows += [(f"{name} --help", [*cli, name, "--help"]) for name in commands()]
    worst = 0.0
    for label, command in rows:
        took = best_of(command, args.repeats)
        worst = max(worst, took)
        print(
            f"wai-dispatch {label:34} {took * 1000:7.1f} ms  "
            f"({took / anchor:4.1f}× the anchor, budget {BUDGET_S * 1000:.0f} ms)"
        )
    print(f"slowest: {worst * 1000:.1f} ms {'within' if worst < BUDGET_S else 'OVER'} the budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
