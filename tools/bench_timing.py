"""How the benchmarks time: the best of N runs, several variants taking turns (so that load from
other processes falls on each alike), and the anchor their rates are printed beside: this
machine's float32 GEMM rate, measured in a fresh process.

    python -m wai_dispatch.tools.bench_timing [--threads 2] [--repeats 7]   # one GEMM rate, JSON
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def best_of(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def best_of_interleaved(fns: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best of ``repeats`` for each function, taking turns, so that load from other processes
    on a shared machine falls on every variant alike."""
    for fn in fns.values():
        fn()  # warm-up
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def _gemm_worker(threads: int, repeats: int, n: int = 2048) -> dict[str, Any]:
    info: list[dict[str, Any]] = []
    try:
        from threadpoolctl import (
            threadpool_info,
            threadpool_limits,
        )
    except ImportError:
        limits: Any = None
    else:
        limits = threadpool_limits(limits=threads)
        info = threadpool_info()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    t = best_of(lambda: a @ b, repeats)
    if limits is not None:
        limits.restore_original_limits()
    blas = [
        {k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
        for i in info
        if i.get("user_api") == "blas"
    ]
    return {"gflops": 2 * n**3 / t / 1e9, "seconds": t, "blas": blas}


def gemm_rate(threads: int, repeats: int, *, clean_env: bool) -> dict[str, Any]:
    """The float32 GEMM rate in a subprocess; ``clean_env`` unsets OPENBLAS_CORETYPE and
    OPENBLAS_L2_SIZE for that command only (``env -u``)."""
    env = dict(os.environ)
    if clean_env:
        for key in BLAS_ENV:
            env.pop(key, None)
    argv = [sys.executable, "-m", "wai_dispatch.tools.bench_timing"]
    argv += ["--threads", str(threads), "--repeats", str(repeats)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    prog = "python -m wai_dispatch.tools.bench_timing"
    p = argparse.ArgumentParser(prog=prog, description=__doc__)
    p.add_argument("--threads", type=int, default=2, help="BLAS threads (default 2)")
    p.add_argument("--repeats", type=int, default=7, help="best of N (default 7)")
    args = p.parse_args(argv)
    print(json.dumps(_gemm_worker(args.threads, args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
