"""Benchmark the ONNX Runtime path: the bmshj2018 synthesis, plain export against the sub-pixel
rewrite against torch, as a fraction of this machine's float32 GEMM rate.

    python -m wai_dispatch.tools.bench_onnx [--repeats N] [--threads 2] [--sweep]
        [--random | --set DIR]

It also holds the small fixture the tests use: :func:`synthesis_files` writes a synthesis
(a list of layers) as the set writer's format does (``decoder.onnx`` with its initializers as
external data in ``decoder.weights``), and :func:`memory_set` holds it in memory as a set.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter, configure_thread_pool
from wai_dispatch.paths.onnx_rewrite import rewrite_model
from wai_dispatch.tools._compressai import factorized_prior

# (kind, a, b): ("deconv", weight [Cin, Cout, 5, 5], bias [Cout]) or
# ("igdn", gamma [C, C], beta [C]) with GDN's reparameterised values.
Layer = tuple[str, np.ndarray, np.ndarray]

SIZES = ((256, 256), (768, 512))  # pictures, width × height
_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


# --- the fixture -------------------------------------------------------------------------


def onnx_program_facts() -> dict[str, Any]:
    return {
        "programs": {
            "onnx-runtime": {
                "file": "decoder.onnx",
                "weights": "decoder.weights",
                "input": "latent",
                "output": "x_hat",
            }
        }
    }


def synthesis_files(layers: Sequence[Layer]) -> tuple[bytes, bytes]:
    """``(decoder.onnx, decoder.weights)``: the plain synthesis, ConvTranspose k5 s2 p2 op1
    and inverse GDN as ``x · sqrt(conv1x1(x·x, γ) + β)``, initializers as external data."""
    import onnx
    from onnx import TensorProto, helper

    weights = bytearray()
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def add(name: str, arr: np.ndarray) -> str:
        arr = np.ascontiguousarray(arr, dtype="<f4")
        while len(weights) % 64:
            weights.append(0)
        t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, dims=arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", "decoder.weights"),
            ("offset", str(len(weights))),
            ("length", str(arr.nbytes)),
        ):
            t.external_data.add(key=key, value=value)
        weights.extend(arr.tobytes())
        inits.append(t)
        return name

    x = "latent"
    channels = int(layers[0][1].shape[0])
    for i, (kind, a, b) in enumerate(layers):
        y = "x_hat" if i == len(layers) - 1 else f"l{i}"
        if kind == "deconv":
            w, bias = add(f"l{i}.weight", a), add(f"l{i}.bias", b)
            nodes.append(
                helper.make_node(
                    "ConvTranspose",
                    [x, w, bias],
                    [y],
                    name=f"l{i}.deconv",
                    kernel_shape=[5, 5],
                    strides=[2, 2],
                    pads=[2, 2, 2, 2],
                    output_padding=[1, 1],
                )
            )
        elif kind == "igdn":
            c = a.shape[0]
            g, beta = add(f"l{i}.gamma", a.reshape(c, c, 1, 1)), add(f"l{i}.beta", b)
            nodes += [
                helper.make_node("Mul", [x, x], [f"l{i}.sq"], name=f"l{i}.sq"),
                helper.make_node("Conv", [f"l{i}.sq", g, beta], [f"l{i}.norm"], name=f"l{i}.norm"),
                helper.make_node("Sqrt", [f"l{i}.norm"], [f"l{i}.sqrt"], name=f"l{i}.sqrt"),
                helper.make_node("Mul", [x, f"l{i}.sqrt"], [y], name=f"l{i}.out"),
            ]
        else:
            raise ValueError(f"layer kind {kind!r} is deconv or igdn")
        x = y
    graph = helper.make_graph(
        nodes,
        "synthesis",
        [helper.make_tensor_value_info("latent", TensorProto.FLOAT, [1, channels, "h", "w"])],
        [helper.make_tensor_value_info("x_hat", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString(), bytes(weights)


def memory_set(layers: Sequence[Layer]) -> LoadedSet:
    model, weights = synthesis_files(layers)
    files = {"decoder.onnx": model, "decoder.weights": weights}
    return LoadedSet.from_files(files, facts=onnx_program_facts())


def random_layers(m: int = 192, n: int = 128, seed: int = 0) -> list[Layer]:
    """A bmshj2018-shaped synthesis (M→N→N→N→3) with random weights of sane scale."""
    rng = np.random.default_rng(seed)
    layers: list[Layer] = []
    chans = [(m, n), (n, n), (n, n), (n, 3)]
    for i, (cin, cout) in enumerate(chans):
        last = i == len(chans) - 1
        # 5×5 stride 2: each output sums ~cin·25/4 terms; the last layer brings x_hat to ~[0, 1]
        w = rng.normal(0, (0.005 if last else 1) / np.sqrt(cin * 25 / 4), (cin, cout, 5, 5))
        b = np.full(cout, 0.5) if last else rng.normal(0, 0.05, cout)
        layers.append(("deconv", w.astype(np.float32), b.astype(np.float32)))
        if not last:
            gamma = np.abs(rng.normal(0, 0.002, (cout, cout))) + 0.05 * np.eye(cout)
            beta = 1 + np.abs(rng.normal(0, 0.1, cout))
            layers.append(("igdn", gamma.astype(np.float32), beta.astype(np.float32)))
    return layers


def g_s_layers(g_s: Any) -> list[Layer]:
    """The layers of a CompressAI ``g_s`` (ConvTranspose2d and inverse GDN), GDN's β and γ
    taken as values (``beta_reparam(beta)``, ``gamma_reparam(gamma)``)."""
    import torch

    layers: list[Layer] = []
    with torch.no_grad():
        for module in g_s:
            if isinstance(module, torch.nn.ConvTranspose2d):
                w = module.weight.numpy().copy()
                b = np.zeros(w.shape[1], np.float32) if module.bias is None else module.bias.numpy()
                layers.append(("deconv", w, b.copy()))
            elif type(module).__name__ == "GDN" and module.inverse:
                beta = module.beta_reparam(module.beta).numpy().copy()
                gamma = module.gamma_reparam(module.gamma).numpy().copy()
                layers.append(("igdn", gamma, beta))
            else:
                raise ValueError(f"unexpected synthesis layer {module!r}")
    return layers


def synthesis_flops(model: bytes, latent_hw: tuple[int, int], channels: int) -> int:
    """2 × the multiply-accumulates of the graph's Conv and ConvTranspose nodes for a latent
    of ``latent_hw`` (the useful work: a rewritten graph is counted on its plain form)."""
    import onnx
    from onnx import shape_inference

    proto = onnx.load_from_string(model)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    for d, v in zip(dims, (1, channels, *latent_hw), strict=True):
        d.Clear()
        d.dim_value = v
    proto = shape_inference.infer_shapes(proto)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*proto.graph.value_info, *proto.graph.input, *proto.graph.output]
    }
    wshape = {t.name: list(t.dims) for t in proto.graph.initializer}
    macs = 0
    for node in proto.graph.node:
        if node.op_type == "Conv":
            cout, cin_g, kh, kw = wshape[node.input[1]]
            _, _, ho, wo = shapes[node.output[0]]
            macs += cout * cin_g * kh * kw * ho * wo
        elif node.op_type == "ConvTranspose":
            cin, cout_g, kh, kw = wshape[node.input[1]]
            _, _, hi, wi = shapes[node.input[0]]
            macs += cin * cout_g * kh * kw * hi * wi
    return 2 * macs


# --- measurements ------------------------------------------------------------------------


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
        for key in _BLAS_ENV:
            env.pop(key, None)
    argv = [sys.executable, "-m", "wai_dispatch.tools.bench_onnx", "--worker", "gemm"]
    argv += ["--threads", str(threads), "--repeats", str(repeats)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _ort_session(model: bytes, weights: bytes, *, pool: str = "global", spin: bool = True) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_external_initializers_from_files_in_memory(
        ["decoder.weights"], [weights], [len(weights)]
    )
    if pool == "global":
        so.use_per_session_threads = False
    else:
        so.intra_op_num_threads = int(pool)
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _rewritten(model: bytes, weights: bytes) -> bytes:
    import onnx

    proto = onnx.load_from_string(model)
    rewrite_model(proto, {"decoder.weights": weights})
    return bytes(proto.SerializeToString())


def _latent(channels: int, size: tuple[int, int], seed: int = 1) -> np.ndarray:
    w, h = size
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0, 2.0, (1, channels, h // 16, w // 16))).astype(np.float32)


def _read_dir(path: str) -> dict[str, bytes]:
    files = {}
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as f:
            files[name] = f.read()
    return files


def _threads_worker(config: str, threads: int, repeats: int, set_dir: str) -> dict[str, Any]:
    """Time the rewritten synthesis under one thread configuration (one per process: the
    global pool is process-wide)."""
    import onnxruntime as ort

    files = _read_dir(set_dir)
    model, weights = files["decoder.onnx"], files["decoder.weights"]
    if config.startswith("global"):
        ort.set_global_thread_pool_sizes(threads, 1)
        session = _ort_session(_rewritten(model, weights), weights)
    else:
        session = _ort_session(
            _rewritten(model, weights), weights, pool=str(threads), spin=config == "session-spin"
        )
    channels = session.get_inputs()[0].shape[1]
    out = {}
    for size in SIZES:
        x = _latent(channels, size)
        out[f"{size[0]}x{size[1]}"] = best_of(partial(session.run, None, {"latent": x}), repeats)
    return out


def _rss_worker(set_dir: str) -> dict[str, Any]:
    """Peak RSS of one 768×512 synthesis through the adapter, in a fresh process.

    Linux keeps the parent's peak in ``ru_maxrss`` across fork and exec, so a child
    launched from this (large) benchmark reports at least the parent's peak; ``VmHWM``
    (this process image's own high-water mark) is the figure that means something.
    """

    def hwm_mib() -> float:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024

    files = _read_dir(set_dir)
    set_files = LoadedSet.from_files(files, facts=onnx_program_facts())
    job = SynthesisJob(set_files, _latent(192, SIZES[1]))
    before = hwm_mib()
    OnnxRuntimeAdapter().run(job)
    return {
        "vmhwm_mib": hwm_mib(),
        "before_mib": before,
        "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _worker_json(argv: list[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "wai_dispatch.tools.bench_onnx", "--worker", *argv],
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {argv} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.bench_onnx", description=__doc__)
    p.add_argument("--repeats", type=int, default=7, help="best of N (default 7)")
    p.add_argument("--threads", type=int, default=2, help="threads for every runtime (2)")
    p.add_argument("--sweep", action="store_true", help="also compare thread configurations")
    p.add_argument("--random", action="store_true", help="random weights (no torch needed)")
    p.add_argument("--set", metavar="DIR", help="a written set's directory (set.json and files)")
    p.add_argument("--quick", action="store_true", help="64×64, random weights, 1 repeat (smoke)")
    p.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = ((64, 64),) if args.quick else SIZES
    if args.quick:
        args.repeats, args.random = 1, True

    if args.worker:
        kind, *rest = args.worker
        if kind == "gemm":
            result = _gemm_worker(args.threads, args.repeats)
        elif kind == "threads":
            result = _threads_worker(rest[0], args.threads, args.repeats, rest[1])
        elif kind == "rss":
            result = _rss_worker(rest[0])
        else:
            raise SystemExit(f"unknown worker {kind}")
        print(json.dumps(result))
        return 0

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
    plain = _ort_session(model, weights)
    rewritten = _ort_session(_rewritten(model, weights), weights)
    channels = int(plain.get_inputs()[0].shape[1])

    load = os.getloadavg()
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
    print(
        f"best of {args.repeats}, interleaved; "
        f"load average at start {load[0]:.2f}, at end {os.getloadavg()[0]:.2f}, "
        f"on {os.cpu_count()} CPUs"
    )
    blas = ", ".join(
        f"{b['internal_api']} {b['version']} {b['architecture']}" for b in gemm["blas"]
    )
    print(
        f"float32 GEMM 2048² (env -u {' -u '.join(_BLAS_ENV)}): {gemm['gflops']:.0f} GFLOP/s "
        f"(before {gemm_before['gflops']:.0f}, after {gemm_after['gflops']:.0f}) "
        f"[{blas or 'threadpoolctl not installed'}]"
    )
    blas_env = ", ".join(f"{b['architecture']}" for b in gemm_env["blas"])
    shown = {k: os.environ.get(k) for k in _BLAS_ENV}
    print(f"  (with this shell's {shown}: {gemm_env['gflops']:.0f} GFLOP/s, {blas_env})")
    print()
    header = f"{'picture':>9} {'GFLOP':>6} | {'ORT plain':>14} | {'ORT rewritten':>14} |"
    header += f" {'torch g_s':>14} | {'plain/rewr':>10} {'torch/rewr':>10}"
    print(header)
    for size, flops, t in rows:
        t_plain, t_rewr, t_torch = t["plain"], t["rewritten"], t.get("torch", float("nan"))

        def cell(t: float, flops: int = flops) -> str:
            return f"{t * 1e3:7.1f} ms {flops / t / 1e9 / gemm['gflops']:4.0%}"

        print(
            f"{size[0]:>4}×{size[1]:<4} {flops / 1e9:6.2f} | {cell(t_plain)} | {cell(t_rewr)} |"
            f" {cell(t_torch)} | {t_plain / t_rewr:10.2f} {t_torch / t_rewr:10.2f}"
        )
    print("(% = the synthesis' useful FLOP rate as a fraction of the GEMM rate above)")

    with tempfile.TemporaryDirectory() as set_dir:
        for name, data in (("decoder.onnx", model), ("decoder.weights", weights)):
            with open(os.path.join(set_dir, name), "wb") as f:
                f.write(data)
        rss = _worker_json(["rss", set_dir])
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
                    r = _worker_json(
                        [
                            *("threads", config, set_dir),
                            *("--threads", str(threads), "--repeats", str(per)),
                        ]
                    )
                    old = best.setdefault((config, threads), r)
                    best[(config, threads)] = {k: min(v, old[k]) for k, v in r.items()}
            for (config, threads), r in best.items():
                cells = "  ".join(f"{k}: {v * 1e3:6.1f} ms" for k, v in r.items())
                print(f"  {config:>15} {threads} thread(s): {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
