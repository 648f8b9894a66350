"""``python -m wai_dispatch.tools.bench [--quick] all|NAME…`` runs the benchmarks below, each
printing its figures beside its anchor, measured in the same run, with the load average before
and after; ``bench NAME [OPTIONS…]`` runs one with its own options (``bench NAME --help``).

Ratios are ours ÷ anchor, of a time (below 1: faster) or of a rate (above 1: does more).
``--quick``: each bench's smallest sizes, one repetition; a smoke run whose figures mean nothing."""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from wai_dispatch.tools.harness import loadavg


class Bench(NamedTuple):
    module: str  # under wai_dispatch.tools
    quick: str  # its arguments in a --quick run
    about: str


BENCHES = {
    "entropy": Bench("bench_entropy", "--repeats 1", "rANS decode vs CompressAI's C++ rANS"),
    "onnx": Bench("bench_onnx", "--quick", "synthesis vs torch and vs this machine's GEMM rate"),
    "decode": Bench("bench_decode", "--quick", "payload → RGB8 vs CompressAI's decompress()"),
    "envelope": Bench("bench_envelope", "--quick", "envelope → RGB8, warm and cold, vs CompressAI"),
    "throughput": Bench("bench_throughput", "--quick", "decodes/s per core; batching"),
    "profile": Bench("bench_profile", "--quick", "a warm decode's stages and ORT's operators"),
    "hyperprior": Bench("bench_hyperprior", "--repeats 1", "the hyperprior decode vs CompressAI's"),
    "service": Bench(
        "bench_service", "--requests 2 --rounds 1 --no-memory", "HTTP decodes/s vs in-process"
    ),
    "dashboard": Bench(
        "bench_dashboard", "--count 1000 --repeat 2 --loads 1", "the dashboard's paint and API"
    ),
    "summary": Bench(
        "bench_summary",
        "--count 2000 --repeat 1 --raw-repeat 1 --no-postgres",
        "the month summary from roll-ups vs from the reports alone",
    ),
    "store": Bench(
        "bench_store",
        "--seconds 0.2 --writers 1,4 --no-postgres",
        "acknowledged reports/s at 1, 8, 64 writers: group commit vs a transaction each",
    ),
    "make-set": Bench("bench_make_set", "--quick", "both set writers, step by step"),
    "int": Bench("bench_int", "--quick", "integer synthesis vs the float decode, int8/f32 peaks"),
    "warm": Bench("bench_warm", "--quick", "first decode after ready vs a warm one"),
    "cli": Bench("bench_cli", "--repeats 1", "`--help` of every command vs `python -c pass`"),
    "tiles": Bench("bench_tiles", "--quick --no-big", "a decode's VmHWM by size, tiled or not"),
    "answer": Bench("bench_answer", "--quick", "PNG levels and raw RGB8 beside the decode"),
    "ray": Bench("bench_ray", "--seconds 3 --clients 2", "Ray Serve, 2 replicas vs 1 (ray extra)"),
    "page": Bench("bench_page", "--quick", "the page's float decode per path vs native"),
}


def _help() -> str:
    lines = [__doc__.split("\n\n")[0], "", "benchmarks:"]
    lines += [f"  {name:11} {bench.about}" for name, bench in BENCHES.items()]
    return "\n".join(lines)


def _module(name: str) -> Any:
    return importlib.import_module(f"wai_dispatch.tools.{BENCHES[name].module}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] in (["-h"], ["--help"]):
        print(_help())
        return 0
    quick = args[:1] == ["--quick"]
    args = args[quick:]
    split = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    names, options = args[:split] or ["all"], args[split:]
    if options == ["--quick"]:  # `bench all --quick`
        quick, options = True, []
    if names == ["all"]:
        names = list(BENCHES)  # one whose extra is missing says it skipped
    unknown = [n for n in names if n not in BENCHES]
    if unknown or (options and len(names) > 1):
        print(f"unknown benchmark {unknown[0]!r}" if unknown else "options go with one benchmark")
        print(_help())
        return 2
    if {"-h", "--help"} & set(options):
        return int(_module(names[0]).main(options))
    status = 0
    for name in names:
        print(f"\n=== {name} (wai_dispatch.tools.{BENCHES[name].module}) ===", flush=True)
        note = " (--quick: figures mean nothing)" if quick else ""
        print(f"[{name}] before: {loadavg()}{note}", flush=True)
        t0 = time.perf_counter()
        bench_args = [*BENCHES[name].quick.split(), *options] if quick else options
        status |= _module(name).main(bench_args)
        print(f"[{name}] after {time.perf_counter() - t0:.0f} s: {loadavg()}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
