"""Benchmark the ONNX Runtime synthesis (:mod:`tools.onnx_synthesis`): plain export beside the
sub-pixel rewrite beside torch, each as a fraction of this machine's float32 GEMM rate."""

from __future__ import annotations

import json
import os
import resource
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter, configure_thread_pool
from wai_dispatch.tools._compressai import factorized_prior
from wai_dispatch.tools.harness import (
    BLAS_ENV,
    best_of,
    best_of_interleaved,
    fresh,
    gemm_rate,
    loadavg,
    memory_kib,
    parser,
    table,
)
from wai_dispatch.tools.onnx_synthesis import (
    g_s_layers,
    onnx_program_facts,
    ort_session,
    random_layers,
    rewritten_model,
    synthesis_files,
    synthesis_flops,
)

SIZES = ((256, 256), (768, 512))  # pictures, width × height


def _latent(channels: int, size: tuple[int, int], seed: int = 1) -> np.ndarray:
    w, h = size
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0, 2.0, (1, channels, h // 16, w // 16))).astype(np.float32)


def _read_dir(path: str) -> dict[str, bytes]:
    return {file.name: file.read_bytes() for file in Path(path).iterdir()}


def threads_worker(config: str, threads: int, repeats: int, set_dir: str) -> dict[str, Any]:
    """Time the rewritten synthesis under one thread configuration (one per process: the
    global pool is process-wide)."""
    import onnxruntime as ort

    files = _read_dir(set_dir)
    model, weights = files["decoder.onnx"], files["decoder.weights"]
    if config.startswith("global"):
        ort.set_global_thread_pool_sizes(threads, 1)
        session = ort_session(rewritten_model(model, weights), weights)
    else:
        session = ort_session(
            rewritten_model(model, weights),
            weights,
            pool=str(threads),
            spin=config == "session-spin",
        )
    channels = session.get_inputs()[0].shape[1]
    out = {}
    for size in SIZES:
        x = _latent(channels, size)
        out[f"{size[0]}x{size[1]}"] = best_of(partial(session.run, None, {"latent": x}), repeats)
    return out


def rss_worker(set_dir: str) -> dict[str, Any]:
    """Peak memory of one 768×512 synthesis through the adapter, in a fresh process: VmHWM
    (``ru_maxrss`` keeps the launching process's peak across exec on Linux)."""

    files = _read_dir(set_dir)
    set_files = LoadedSet.from_files(files, facts=onnx_program_facts())
    job = SynthesisJob(set_files, _latent(192, SIZES[1]))
    before = memory_kib()["VmHWM"] / 1024
    OnnxRuntimeAdapter().run(job)
    return {
        "vmhwm_mib": memory_kib()["VmHWM"] / 1024,
        "before_mib": before,
        "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("onnx", __doc__, threads=2, repeats=7, quick="64×64, random weights, 1 repeat")
    p.add_argument("--sweep", action="store_true", help="also compare thread configurations")
    p.add_argument("--random", action="store_true", help="random weights (no torch needed)")
    p.add_argument("--set", metavar="DIR", help="a written set's directory (set.json and files)")
    args = p.parse_args(argv)
    sizes = ((64, 64),) if args.quick else SIZES
    if args.quick:
        args.repeats, args.random = 1, True

    import onnxruntime as ort

    # the process-wide pool, once: another bench of the same `bench` run may have made it
    threads = configure_thread_pool(args.threads)
    if threads != args.threads:
        print(f"(ONNX Runtime's pool already holds {threads} threads in this process)")
    g_s = None
    if args.set:
        files = _read_dir(args.set)
        spec = json.loads(files["set.json"])["facts"]["programs"]["onnx-runtime"]
        model, weights = files[spec["file"]], files[spec["weights"]]
        source = f"the set in {args.set} (torch: not run)"
    elif args.random:
        model, weights = synthesis_files(random_layers())
        source = "random weights (random_layers)"
    else:
        import torch

        torch.manual_seed(0)
        torch.set_num_threads(args.threads)
        g_s = factorized_prior(128, 192).g_s.eval()
        model, weights = synthesis_files(g_s_layers(g_s))
        source = "CompressAI FactorizedPrior(128, 192).g_s, untrained"
    plain = ort_session(model, weights)
    rewritten = ort_session(rewritten_model(model, weights), weights)
    channels = int(plain.get_inputs()[0].shape[1])

    load = loadavg()
    gemm_before = gemm_rate(args.threads, args.repeats, clean_env=True)
    rows = []
    for size in sizes:
        x = _latent(channels, size)
        flops = synthesis_flops(model, (x.shape[2], x.shape[3]), channels)
        fns: dict[str, Callable[[], object]] = {
            "plain": partial(plain.run, None, {"latent": x}),
            "rewritten": partial(rewritten.run, None, {"latent": x}),
        }
        if g_s is not None:
            import torch

            xt = torch.from_numpy(x)

            def torch_run(xt: Any = xt) -> object:
                with torch.inference_mode():
                    return g_s(xt)

            fns["torch"] = torch_run
        rows.append((size, flops, best_of_interleaved(fns, args.repeats)))
    gemm_after = gemm_rate(args.threads, args.repeats, clean_env=True)
    gemm_env = gemm_rate(args.threads, max(3, args.repeats // 2), clean_env=False)
    # the anchor: the better of the GEMM runs before and after (a conservative fraction)
    gemm = max(gemm_before, gemm_after, key=lambda g: float(g["gflops"]))

    print(f"synthesis: {source}; onnxruntime {ort.__version__}, {args.threads} threads, ")
    print(f"best of {args.repeats}, interleaved; at the start {load}, at the end {loadavg()}")
    blas = ", ".join(
        f"{b['internal_api']} {b['version']} {b['architecture']}" for b in gemm["blas"]
    )
    print(
        f"float32 GEMM 2048² (env -u {' -u '.join(BLAS_ENV)}): {gemm['gflops']:.0f} GFLOP/s "
        f"(before {gemm_before['gflops']:.0f}, after {gemm_after['gflops']:.0f}) "
        f"[{blas or 'threadpoolctl not installed'}]"
    )
    blas_env = ", ".join(f"{b['architecture']}" for b in gemm_env["blas"])
    shown = {k: os.environ.get(k) for k in BLAS_ENV}
    print(f"  (with this shell's {shown}: {gemm_env['gflops']:.0f} GFLOP/s, {blas_env})")
    print()

    def cell(t: float, flops: int) -> str:
        return f"{t * 1e3:.1f} ms {flops / t / 1e9 / gemm['gflops']:4.0%}"

    head = ["picture", "GFLOP", "ORT plain", "ORT rewritten", "torch g_s", "plain/rewr"]
    table(
        [*head, "torch/rewr"],
        (
            [f"{w}×{h}", f"{flops / 1e9:.2f}"]
            + [cell(t.get(k, float("nan")), flops) for k in ("plain", "rewritten", "torch")]
            + [f"{t.get(k, float('nan')) / t['rewritten']:.2f}" for k in ("plain", "torch")]
            for (w, h), flops, t in rows
        ),
    )
    print("(% = the synthesis' useful FLOP rate as a fraction of the GEMM rate above)")

    with tempfile.TemporaryDirectory() as set_dir:
        for name, data in (("decoder.onnx", model), ("decoder.weights", weights)):
            (Path(set_dir) / name).write_bytes(data)
        rss = fresh(rss_worker, set_dir)
        print(
            f"\npeak RSS, one 768×512 synthesis through OnnxRuntimeAdapter in a fresh process: "
            f"{rss['vmhwm_mib']:.0f} MiB VmHWM (imports and set read: {rss['before_mib']:.0f} "
            f"MiB; getrusage ru_maxrss {rss['ru_maxrss_mib']:.0f} MiB, which on Linux carries "
            "the launching process's peak across exec)"
        )
        if args.sweep:
            rounds, per = 3, max(2, args.repeats // 3)
            print(
                f"\nthread configurations (rewritten graph; each in its own process, since the "
                f"global pool is process-wide; {rounds} rounds taking turns, best of {per} each):"
            )
            configs = [
                (config, threads)
                for config in ("global", "session-spin", "session-nospin")
                for threads in sorted({1, args.threads})
            ]
            best: dict[tuple[str, int], dict[str, float]] = {}
            for _ in range(rounds):
                for config, threads in configs:
                    r = fresh(threads_worker, config, threads, per, set_dir)
                    old = best.setdefault((config, threads), r)
                    best[(config, threads)] = {k: min(v, old[k]) for k, v in r.items()}
            for (config, threads), r in best.items():
                cells = "  ".join(f"{k}: {v * 1e3:6.1f} ms" for k, v in r.items())
                print(f"  {config:>15} {threads} thread(s): {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
