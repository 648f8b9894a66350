"""``python -m wai_dispatch.tools.bench [all|NAME ...]``: run the benchmarks (names below),
each printing its figures beside the anchor it is compared to, measured in the same run."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

BENCHES = {
    "entropy": "wai_dispatch.tools.bench_entropy",  # rANS decode vs CompressAI's C++ rANS
    "onnx": "wai_dispatch.tools.bench_onnx",  # synthesis vs torch and vs this machine's GEMM rate
    "decode": "wai_dispatch.tools.bench_decode",  # payload → RGB8 vs CompressAI's net.decompress()
    # the hyperprior decode (integer entropy stage + ORT) vs CompressAI's ScaleHyperprior
    "hyperprior": "wai_dispatch.tools.bench_hyperprior",
    "service": "wai_dispatch.tools.bench_service",  # HTTP decodes/s vs the in-process loop
    # summary latency and the dashboard's first paint with 100,000 reports vs 100 ms and 1 s
    "dashboard": "wai_dispatch.tools.bench_dashboard",
    # the month summary from roll-ups at 1,000,000 reports vs the same from the reports alone
    "summary": "wai_dispatch.tools.bench_summary",
    "int": "wai_dispatch.tools.bench_int",  # integer synthesis vs the float decode, int8/f32 peaks
    "warm": "wai_dispatch.tools.bench_warm",  # first decode after ready vs a warm one
    "cli": "wai_dispatch.tools.bench_cli",  # `--help` of every command vs `python -c pass`
    # a decode's VmHWM by picture size, tiled and untiled; 4096² through the CLI and service
    "tiles": "wai_dispatch.tools.bench_tiles",
    "answer": "wai_dispatch.tools.bench_answer",  # PNG levels and raw RGB8 beside the decode
}


def main(argv: Sequence[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or ["all"]
    if names == ["all"]:
        names = list(BENCHES)
    status = 0
    for name in names:
        if name not in BENCHES:
            print(f"unknown benchmark {name!r}; known: all, {', '.join(BENCHES)}")
            return 2
        print(f"\n=== {name} ({BENCHES[name]}) ===", flush=True)
        status |= importlib.import_module(BENCHES[name]).main([])
    return status


if __name__ == "__main__":
    sys.exit(main())
