"""Benchmark the integer path: each exact engine of :mod:`paths.waiops.choose` beside the ONNX
Runtime float synthesis of the same latent (the anchor), at 256×256, 768×512 and 1024×1024,
with its GOP/s against this CPU's int8 (``MatMulInteger``) and float32 GEMM peaks, measured in
the same run; then where the time goes, and peak memory."""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import Manifest, load
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import (
    OnnxRuntimeAdapter,
    configure_thread_pool,
    shared_session_options,
)
from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter
from wai_dispatch.paths.waiops.choose import INT8_GRAPH_PER_MAC, int8_units, machine_engine
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.int8_engine import Int8Engine
from wai_dispatch.paths.waiops.int8_graph import Int8GraphEngine, build_model, products_per_mac
from wai_dispatch.paths.waiops.onnx_engine import OnnxEngine
from wai_dispatch.tools.harness import (
    best_of,
    best_of_interleaved,
    fresh,
    gemm_rate,
    kernel_times,
    loadavg,
    memory_kib,
    parser,
)

CASES = (
    ("256x256", "coffee-256x256"),
    ("768x512", "hubble-768x512"),
    ("1024x1024", "hubble-768x512"),  # its latent tiled to 64×64
)


def _set(folder: Path) -> Any:
    """A bundled set's folder, verified."""
    return load(folder, Manifest.from_bytes((folder / "set.json").read_bytes()).digest)


#: The integer set benchmarked (``--int-set``: another, e.g. a retired one, beside the same float
#: synthesis and latent).
INT_SET = sets_dir() / "int-synth-int8-units-demo-q3"


def _inputs(case: str, label: str = "", int_set: Path = INT_SET) -> tuple[np.ndarray, np.ndarray]:
    tables = EntropyTables.from_json((int_set / "cdfs_q3.json").read_bytes())
    symbols = codec_payload.decode((neural_conformance_dir() / f"{case}.waip").read_bytes(), tables)
    if label == "1024x1024":  # no corpus payload that large: the 768×512 latent, tiled
        symbols = np.ascontiguousarray(np.tile(symbols, (1, 1, 2, 2))[:, :, :64, :64])
    return symbols, codec_payload.latent(symbols, tables)


def _jobs(case: str, label: str = "", int_set: Path = INT_SET) -> tuple[Any, Any]:
    symbols, latent = _inputs(case, label, int_set)
    int_job = SynthesisJob(_set(int_set), latent, symbols)
    float_job = SynthesisJob(_set(sets_dir() / "bmshj2018-demo-q3"), latent, symbols)
    return int_job, float_job


def program_ops(program: Any, h: int, w: int) -> int:
    """2 × the multiply-accumulates of the program's convolutions (the IGDN's 1×1 included)
    for an h × w latent: the same count as the float synthesis's FLOPs."""
    macs = 0
    for op in program.operations:
        if op.op == "conv_transpose2d":
            ci, co, k, _ = op.params["weight"].shape
            macs += ci * co * k * k * h * w
            h, w = h * op.attrs["stride"], w * op.attrs["stride"]
        elif op.op == "igdn":
            c = op.params["gamma"].shape[0]
            macs += c * c * h * w
    return 2 * macs


def int8_products(program: Any, engine: Int8Engine, h: int, w: int) -> int:
    """2 × the int8 × int8 products the int8 engine computes for an h × w latent: each
    multiply-accumulate of :func:`program_ops` times its layer's activation planes × weight
    digits (the engine's GEMM work, its floor at the int8 peak)."""
    products = 0
    for op in program.operations:
        if op.op == "conv_transpose2d":
            ci, co, k, _ = op.params["weight"].shape
            digits = max(g.digits for g in engine._gemms[op.name] if g is not None)
            products += ci * co * k * k * h * w * engine._offsets[op.name][1] * digits
            h, w = h * op.attrs["stride"], w * op.attrs["stride"]
        elif op.op == "igdn":
            c = op.params["gamma"].shape[0]
            planes, gemm = engine._igdn[op.name]
            products += c * c * h * w * planes * gemm.digits
    return 2 * products


def graph_products(program: Any, engine: Int8GraphEngine, h: int, w: int) -> int:
    """2 × the int8 products the int8 graph engine's ``ConvInteger`` nodes compute for an
    h × w latent (planes × digits × the input channels each digit reads)."""
    products = 0
    for op in program.operations:
        if op.op in ("conv2d", "conv_transpose2d"):
            products += engine.products.get(op.name, 0) * h * w
            if op.op == "conv_transpose2d":
                h, w = h * op.attrs["stride"], w * op.attrs["stride"]
        elif op.op == "igdn":  # a float32 1×1 Conv in the graph: not int8 work
            continue
    return 2 * products


def graph_profile(int_job: Any, wai: WaiOpsAdapter, runs: int = 5) -> str:
    """Where one 256×256 run of the int8 graph engine spends its time, by ONNX operator:
    ONNX Runtime's own profile over ``runs`` runs, each node's fastest run, summed by op."""
    engine = Int8GraphEngine(wai.program(int_job))
    so = shared_session_options()  # the process's pool (--threads)
    feeds = {"symbols": int_job.symbols.astype(np.float32)}
    fastest: dict[str, float] = {}
    kind: dict[str, str] = {}
    for node, op, us in kernel_times(engine.model, so, feeds, runs):
        fastest[node] = min(fastest.get(node, 1e18), us)
        kind[node] = op
    by: dict[str, float] = {}
    for name, dur in fastest.items():
        by[kind[name]] = by.get(kind[name], 0.0) + dur
    total = max(sum(by.values()), 1e-9)
    top = sorted(by.items(), key=lambda kv: -kv[1])[:8]
    shares = ", ".join(f"{k} {v / total:.0%}" for k, v in top)
    return (
        f"int8 graph engine, 256×256, by operator (ONNX Runtime's profile, each node's fastest "
        f"of {runs} runs, {total / 1e3:.1f} ms in all): {shares}"
    )


def int8_profile(int_job: Any, wai: WaiOpsAdapter) -> str:
    """Where one 256×256 run of the int8 engine spends its time: by stage (cProfile's
    cumulative time of each stage's function), and by operation (one unprofiled run)."""
    engine = Int8Engine(wai.program(int_job))
    engine.run(int_job.symbols)
    profiler = cProfile.Profile()
    profiler.enable()
    engine.run(int_job.symbols)
    profiler.disable()
    stats: Any = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    cum: dict[str, float] = {}
    for (file, _, func), (_, _, _, ct, _) in stats.items():
        if "onnxruntime" in func and func.rstrip(">").endswith(".run"):
            key = "gemm"
        elif file.endswith("int8_engine.py"):
            key = func
        elif file.endswith("engine.py"):
            key = f"base.{func}"  # Engine's run and the _apply the int8 engine defers to
        else:
            continue
        cum[key] = cum.get(key, 0.0) + ct
    total = cum.get("base.run", 0.0)
    stages = {
        "GEMMs (MatMulInteger)": cum.get("gemm", 0.0),
        "activation planes": cum.get("_planes_of", 0.0),
        "im2col": cum.get("_im2col", 0.0),
        "plane recombination (int64)": cum.get("_recombine", 0.0),
    }
    stages["the rest (requantisation, IGDN square and root, clamps, padding)"] = total - sum(
        stages.values()
    )
    shares = ", ".join(f"{k} {v / max(total, 1e-9):.0%}" for k, v in stages.items())
    kinds = _op_seconds(engine, int_job.symbols)  # one unprofiled run, by operation
    spent = max(sum(kinds.values()), 1e-9)
    shares += "; by operation: " + ", ".join(f"{k} {v / spent:.0%}" for k, v in kinds.items())
    return f"int8 engine, one 256×256 run ({total * 1e3:.0f} ms profiled): {shares}"


def _op_seconds(engine: Int8Engine, symbols: np.ndarray) -> dict[str, float]:
    """One unprofiled run of ``engine``'s operations, timed by kind (the convolutions, the
    requantisations, the IGDNs, …)."""
    x = np.ascontiguousarray(symbols[0].transpose(1, 2, 0)).astype(np.int32)
    values = {engine.program.input_name: x}
    seconds: dict[str, float] = {}
    for op in engine.program.operations:
        t0 = time.perf_counter()
        values[op.output] = engine._apply(op, values)
        seconds[op.op] = seconds.get(op.op, 0.0) + time.perf_counter() - t0
    return seconds


def int8_worker(threads: int, repeats: int, n: int = 2048) -> dict[str, Any]:
    """ONNX Runtime MatMulInteger (uint8 × int8 → int32), n³ MACs: this CPU's int8 GEMM rate."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "int8",
        [
            helper.make_tensor_value_info("a", TensorProto.UINT8, [n, n]),
            helper.make_tensor_value_info("b", TensorProto.INT8, [n, n]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [n, n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    session = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (n, n), dtype=np.uint8)
    b = rng.integers(-127, 127, (n, n), dtype=np.int8)
    t = best_of(lambda: session.run(None, {"a": a, "b": b}), repeats)
    return {"gops": 2 * n**3 / t / 1e9, "seconds": t}


def rss_worker(kind: str) -> dict[str, Any]:
    """VmHWM after one 768×512 decode on one path, in a fresh process."""

    int_job, float_job = _jobs(CASES[1][1])
    before = memory_kib()["VmHWM"] / 1024
    if kind == "integer":
        WaiOpsAdapter().run(int_job)
    else:
        OnnxRuntimeAdapter().run(float_job)
    return {"vmhwm_mib": memory_kib()["VmHWM"] / 1024, "before_mib": before}


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("int", __doc__, threads=2, repeats=7, quick="256×256 only, 1 repeat (smoke)")
    p.add_argument("--int-set", type=Path, default=INT_SET, help="the integer set's folder")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats = 1
    configure_thread_pool(args.threads)
    int8 = fresh(int8_worker, args.threads, args.repeats)
    f32 = gemm_rate(args.threads, args.repeats, clean_env=True)
    print(
        f"peaks, same run: int8 MatMulInteger 2048² {int8['gops']:.0f} GOP/s; "
        f"float32 GEMM 2048² {f32['gflops']:.0f} GFLOP/s"
    )
    wai, ort_adapter = WaiOpsAdapter(), OnnxRuntimeAdapter()
    print(
        f"{loadavg()}; CPU int8 units: {int8_units()}; ratio: engine ÷ float synthesis in time "
        "(goal ≤ 0.6)"
    )
    print(
        f"{'picture':9} {'engine':10} {'time':>10} {'float':>10} {'ratio':>6} {'GOP/s':>6} "
        f"{'of int8':>8} {'of f32':>7}"
    )
    for label, case in CASES[:1] if args.quick else CASES:
        int_job, float_job = _jobs(case, label, args.int_set)
        program = wai.program(int_job)
        if label == CASES[0][0]:
            per_mac = products_per_mac(program, build_model(program)[1])
            print(
                f"{args.int_set.name}: auto chooses the {machine_engine(program=program)} engine"
                f" ({per_mac:.3f} int8 products"
                f" a multiply-accumulate; int8-graph at ≤ {INT8_GRAPH_PER_MAC})"
            )
        engines: dict[str, Any] = {
            "float32": OnnxEngine(program),
            "int8-graph": Int8GraphEngine(program),
            "int8": Int8Engine(program),
        }
        runs = {"float": partial(ort_adapter.run, float_job)}
        runs |= {name: partial(e.run, int_job.symbols) for name, e in engines.items()}
        best = best_of_interleaved(runs, args.repeats)
        if not args.quick:  # the NumPy engine takes seconds a run: not in a --quick run
            best["numpy"] = best_of(
                partial(Engine(program).run, int_job.symbols), max(2, args.repeats // 3)
            )
        ops = program_ops(program, *int_job.symbols.shape[2:])
        for name in ("float32", "int8-graph", "int8", "numpy"):
            if name not in best:
                continue
            rate = ops / best[name] / 1e9
            print(
                f"{label:9} {name:10} {best[name] * 1e3:7.1f} ms {best['float'] * 1e3:7.1f} ms "
                f"{best[name] / best['float']:6.2f} {rate:6.0f} {rate / int8['gops']:8.0%} "
                f"{rate / f32['gflops']:7.0%}"
            )
        latent = int_job.symbols.shape[2:]
        for name, products in (
            ("int8-graph", graph_products(program, engines["int8-graph"], *latent)),
            ("int8", int8_products(program, engines["int8"], *latent)),
        ):
            floor = products / 1e9 / int8["gops"]
            print(
                f"{label:9} {name} GEMM floor: {products / ops:.1f} int8 products a "
                f"multiply-accumulate (planes × digits), at the int8 peak ≥ {floor * 1e3:.1f} ms"
                f" = {floor / best['float']:.2f}× the float synthesis"
            )
    first = _jobs(CASES[0][1], int_set=args.int_set)[0]
    print(graph_profile(first, wai))
    print(int8_profile(first, wai))
    rss_int, rss_float = fresh(rss_worker, "integer"), fresh(rss_worker, "float")
    print(
        f"peak memory, one 768×512 decode in a fresh process (VmHWM): integer "
        f"{rss_int['vmhwm_mib']:.0f} MiB, float {rss_float['vmhwm_mib']:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
