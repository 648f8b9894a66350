"""``python -m wai_dispatch.tools.bench [--quick] [all|NAME ...]``: run the benchmarks (names
below), each printing its figures beside the anchor it is compared to, measured in the same run,
with the machine's load average (``/proc/loadavg``) printed before and after each.

Ratios of a time to its anchor's are ours ÷ anchor (below 1: ours is faster); ratios of a rate
(decodes/s, FLOP/s) are ours ÷ anchor as well (above 1: ours does more). Each bench says which.

``--quick``: every bench with its smallest sizes and one repetition (:data:`QUICK`), a smoke run
that shows each section runs and prints; its figures mean nothing."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

BENCHES = {
    "entropy": "wai_dispatch.tools.bench_entropy",  # rANS decode vs CompressAI's C++ rANS
    "onnx": "wai_dispatch.tools.bench_onnx",  # synthesis vs torch and vs this machine's GEMM rate
    "decode": "wai_dispatch.tools.bench_decode",  # payload → RGB8 vs CompressAI's net.decompress()
    # the whole envelope through the decoder, warm and cold, vs CompressAI's decompress() → RGB8
    "envelope": "wai_dispatch.tools.bench_envelope",
    # decodes/s per core, 1 and 2 processes, HTTP at concurrency 2, batching; CompressAI beside
    "throughput": "wai_dispatch.tools.bench_throughput",
    # a warm decode's stages and ONNX Runtime's per-operator profile, as shares of the decode
    "profile": "wai_dispatch.tools.bench_profile",
    # the hyperprior decode (integer entropy stage + ORT) vs CompressAI's ScaleHyperprior
    "hyperprior": "wai_dispatch.tools.bench_hyperprior",
    "service": "wai_dispatch.tools.bench_service",  # HTTP decodes/s vs the in-process loop
    # summary latency and the dashboard's first paint with 100,000 reports vs 100 ms and 1 s
    "dashboard": "wai_dispatch.tools.bench_dashboard",
    # the month summary from roll-ups at 1,000,000 reports vs the same from the reports alone
    "summary": "wai_dispatch.tools.bench_summary",
    # acknowledged reports/s at 1, 8, 64 writers: group commit vs one transaction per report
    "store": "wai_dispatch.tools.bench_store",
    "make-set": "wai_dispatch.tools.bench_make_set",  # both set writers, step by step
    "int": "wai_dispatch.tools.bench_int",  # integer synthesis vs the float decode, int8/f32 peaks
    "warm": "wai_dispatch.tools.bench_warm",  # first decode after ready vs a warm one
    "cli": "wai_dispatch.tools.bench_cli",  # `--help` of every command vs `python -c pass`
    # a decode's VmHWM by picture size, tiled and untiled; 4096² through the CLI and service
    "tiles": "wai_dispatch.tools.bench_tiles",
    "answer": "wai_dispatch.tools.bench_answer",  # PNG levels and raw RGB8 beside the decode
    # decodes/s through Ray Serve with 2 replicas vs 1 on a local 2-node cluster (ray extra)
    "ray": "wai_dispatch.tools.bench_ray",
    # the page's float decode per path (WebAssembly; WebGPU on SwiftShader) vs the native decode
    "page": "wai_dispatch.tools.bench_page",
}
#: Benchmarks that `all` runs only where their extra is installed (by name, they run anyway).
NEEDS = {"ray": "ray"}

#: Each bench's arguments in a ``--quick`` run: the smallest sizes, one repetition.
QUICK: dict[str, list[str]] = {
    "entropy": ["--repeats", "1"],
    "onnx": ["--quick"],
    "decode": ["--quick"],
    "envelope": ["--quick"],
    "throughput": ["--quick"],
    "profile": ["--quick"],
    "service": ["--requests", "2", "--rounds", "1", "--no-memory"],
    "dashboard": ["--count", "1000", "--repeat", "2", "--loads", "1"],
    "summary": ["--count", "2000", "--repeat", "1", "--raw-repeat", "1", "--no-postgres"],
    "store": ["--seconds", "0.2", "--writers", "1,4", "--no-postgres"],
    "int": ["--quick"],
    "warm": ["--quick"],
    "cli": ["--repeats", "1"],
    "tiles": ["--quick", "--no-big"],
    "answer": ["--quick"],
    "ray": ["--seconds", "3", "--clients", "2"],
    "hyperprior": ["--repeats", "1"],
    "make-set": ["--quick"],
    "page": ["--quick"],
}


def loadavg() -> str:
    """``/proc/loadavg``'s 1, 5 and 15-minute load averages, and the CPU count."""
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"load average {load} on {os.cpu_count()} CPUs"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    quick = "--quick" in args
    names = [a for a in args if a != "--quick"] or ["all"]
    if names == ["all"]:
        names = [n for n in BENCHES if n not in NEEDS or importlib.util.find_spec(NEEDS[n])]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; known: all, {', '.join(BENCHES)}")
        return 2
    status = 0
    for name in names:
        print(f"\n=== {name} ({BENCHES[name]}) ===", flush=True)
        print(f"[{name}] before: {loadavg()}{' (--quick: figures mean nothing)' * quick}",
              flush=True)  # fmt: skip
        t0 = time.perf_counter()
        status |= importlib.import_module(BENCHES[name]).main(QUICK[name] if quick else [])
        print(f"[{name}] after {time.perf_counter() - t0:.0f} s: {loadavg()}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
