"""``python -m wai_dispatch.tools.bench_make_set``: ``make-set`` of both checkpoint writers
(factorized and hyperprior, demo checkpoint, every program) as a user runs it, in a fresh
process; each step's time read from the writer's progress lines, so the step that dominates is
named beside the total. ``--quick``: small fresh models in this process (a smoke run)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from wai_dispatch.tools.harness import loadavg, parser

WRITERS = {
    "bmshj2018": "wai_dispatch.tools.wai_bmshj2018_npu_set",
    "bmshj2018-hyperprior": "wai_dispatch.tools.wai_bmshj2018_hyperprior_set",
}


def timed_writer(module: str, out: Path) -> tuple[float, list[tuple[float, str]]]:
    """The writer's wall time in a fresh process, and each progress line with the seconds
    since the one before (the first: since the start, imports and loading included)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    steps: list[tuple[float, str]] = []
    last = start
    assert proc.stderr is not None
    for line in proc.stderr:
        text = line.strip()
        # coremltools draws its own progress bars on stderr; only the writer's lines count
        if not text or "|" in text or text.startswith(("Converting", "Running")):
            continue
        now = time.perf_counter()
        steps.append((now - last, text[:90]))
        last = now
    if proc.wait() != 0:
        raise SystemExit(f"{module} failed (exit {proc.returncode})")
    return time.perf_counter() - start, steps


def full() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for kind, module in WRITERS.items():
            before = loadavg()
            total, steps = timed_writer(module, Path(tmp) / kind)
            print(f"make-set {kind}: {total:.1f} s ({before} → {loadavg()})")
            for seconds, text in steps:
                print(f"  {seconds:7.1f} s  {text}")
            if steps:
                seconds, text = max(steps)
                print(
                    f"  dominating step: {seconds:.1f} s ({100 * seconds / total:.0f}%), up to "
                    f"“{text}”"
                )
    return 0


def quick() -> int:
    import torch

    from wai_dispatch.tools import wai_bmshj2018_hyperprior_set, wai_bmshj2018_npu_set
    from wai_dispatch.tools._compressai import factorized_prior, scale_hyperprior

    with tempfile.TemporaryDirectory() as tmp:
        for kind, make, writer in (
            ("bmshj2018", factorized_prior, wai_bmshj2018_npu_set.write_set),
            ("bmshj2018-hyperprior", scale_hyperprior, wai_bmshj2018_hyperprior_set.write_set),
        ):
            torch.manual_seed(30)
            net = make(16, 24)
            net.update(force=True)
            checkpoint = Path(tmp) / f"{kind}.pt"
            torch.save(net.state_dict(), checkpoint)
            start = time.perf_counter()
            writer(Path(tmp) / kind, checkpoint=checkpoint, coreml=False)
            took = time.perf_counter() - start
            print(f"make-set {kind} (fresh N=16 M=24, no Core ML): {took:.1f} s ({loadavg()})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser("make-set", __doc__, quick="small fresh models, a smoke run").parse_args(argv)
    return quick() if args.quick else full()


if __name__ == "__main__":
    raise SystemExit(main())
