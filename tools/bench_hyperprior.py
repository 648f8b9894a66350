"""``python -m wai_dispatch.tools.bench_hyperprior``: the whole hyperprior decode, ``WAIH`` bytes →
RGB8, beside CompressAI's float ``ScaleHyperprior.decompress()`` (same weights and threads), at
256×256 and 768×512; and the entropy stage alone (all of ``decompress()`` but ``g_s``), with the
hyper-synthesis ``h_s`` alone, its share of the stage and its engine's int8 products a
multiply-accumulate (planes × digits). ``--set DIR`` (repeatable) benches other hyperprior sets
of the same weights (the ``int8-units`` profile's), every set's stage interleaved in one run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter, configure_thread_pool
from wai_dispatch.paths.waiops import choose
from wai_dispatch.paths.waiops.int8_graph import Int8GraphEngine
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.decoding.results import to_rgb8
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.bench_decode import SIZES, _picture
from wai_dispatch.tools.harness import best_of_interleaved, loadavg, parser, table
from wai_dispatch.tools.hyperprior_encode import (
    DEMO_CHECKPOINT,
    HyperAnalysis,
    encode_with,
    load_hyper_model,
    open_folder,
)

SET_NAME = "bmshj2018-hyperprior-int8-units-demo-q3"


def _per_mac(runner: object) -> str:
    """The engine's int8 products a multiply-accumulate (the int8 graph's own count)."""
    return f"{runner.per_mac:.3f}" if isinstance(runner, Int8GraphEngine) else "-"


def run(
    threads: int, repeats: int, set_dirs: Sequence[Path] = ()
) -> tuple[list[tuple[str, str, str]], list[dict[str, Any]]]:
    """Per set, its name, ``h_s``'s engine and products a multiply-accumulate; per picture, the
    timings (every set's entropy stage keyed by its index: ``entropy{i}_ms``, ``h_s{i}_ms``)."""
    import torch

    torch.set_num_threads(threads)
    configure_thread_pool(threads)
    folders = [sets_dir() / SET_NAME, *set_dirs]
    files = open_folder(folders[0])
    stages = []
    for folder in folders:
        stage_files = open_folder(folder)
        stage = HyperStage.of(stage_files)
        assert stage is not None, f"{folder}: not a hyperprior set"
        stages.append((stage_files.manifest.name, stage))
    stage = stages[0][1]
    net = load_hyper_model(DEMO_CHECKPOINT)
    analysis = HyperAnalysis(net)
    adapter = OnnxRuntimeAdapter()
    limits = Limits()
    rows = []
    for height, width in SIZES:
        picture = np.ascontiguousarray(_picture(height, width))
        body = encode_with(analysis, stage, picture)
        x = torch.from_numpy(picture.copy()).permute(2, 0, 1)[None].float() / 255.0
        with torch.no_grad():
            out = net.compress(x)

        def ours(body: bytes = body) -> np.ndarray:
            result = stage.run(body, limits=limits)
            return to_rgb8(adapter.run(SynthesisJob(files, result.latent, result.symbols)))

        def theirs(out: dict[str, Any] = out) -> Any:
            with torch.no_grad():
                return net.decompress(out["strings"], out["shape"])["x_hat"]

        def entropy_numpy(body: bytes = body) -> Any:  # the same stage, h_s on NumPy float64
            return stage.run(body, limits=limits, engine="numpy")

        def entropy_int8(body: bytes = body) -> Any:  # h_s on MatMulInteger with NumPy glue
            return stage.run(body, limits=limits, engine="int8")

        def theirs_entropy(out: dict[str, Any] = out) -> Any:
            # ScaleHyperprior.decompress() without its last line, g_s
            with torch.no_grad():
                z_hat = net.entropy_bottleneck.decompress(out["strings"][1], out["shape"])
                indexes = net.gaussian_conditional.build_indexes(net.h_s(z_hat))
                return net.gaussian_conditional.decompress(out["strings"][0], indexes, z_hat.dtype)

        fns: dict[str, Callable[[], object]] = {
            "ours": ours,
            "compressai": theirs,
            "entropy_numpy": entropy_numpy,
            "entropy_int8": entropy_int8,
            "compressai_entropy": theirs_entropy,
        }
        for i, (_, each) in enumerate(stages):
            coded = encode_with(analysis, each, picture)  # its own indexes: its own payload
            header = waih.read_header(coded, limits=limits)
            z = waih.decode_z(coded, header, each.z_tables)
            runner = each.engines.runner()
            fns[f"entropy{i}"] = partial(each.run, coded, limits=limits)
            fns[f"h_s{i}"] = partial(runner.run, z, limits)
        best = best_of_interleaved(fns, repeats)
        ms = {f"{name}_ms": seconds * 1e3 for name, seconds in best.items()}
        theirs_bytes = sum(len(s) for g in out["strings"] for s in g)
        row: dict[str, Any] = {
            "picture": f"{width}×{height}",
            **ms,
            "entropy_ms": ms["entropy0_ms"],
            "ratio": best["ours"] / best["compressai"],  # bytes: ours / CompressAI
            "bytes": f"{len(body)} / {theirs_bytes}",
        }
        for i in range(len(stages)):
            row[f"entropy{i}_ratio"] = best[f"entropy{i}"] / best["compressai_entropy"]
            row[f"h_s{i}_share"] = f"{100 * best[f'h_s{i}'] / best[f'entropy{i}']:.0f}%"
        rows.append(row)
    named = []
    for set_name, each in stages:
        runner = each.engines.runner()
        named.append((set_name, choose.engine_name(runner), _per_mac(runner)))
    return named, rows


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("hyperprior", __doc__, threads=2, repeats=5)
    p.add_argument(
        "--set",
        dest="sets",
        type=Path,
        action="append",
        default=[],
        help="another hyperprior set's folder (same weights) whose entropy stage to bench too",
    )
    args = p.parse_args(argv)
    start = loadavg()
    named, rows = run(args.threads, args.repeats, args.sets)
    print(
        f"hyperprior decode WAIH → RGB8, bmshj2018-hyperprior q3 (demo weights), {args.threads} "
        f"threads, best of {args.repeats}, interleaved; {start} (at the start)"
    )
    columns = ("picture", "ours_ms", "entropy_ms", "compressai_ms", "ratio", "bytes")
    table(
        ["picture", "ours (ORT cpu) ms", "of it: entropy ms", "CompressAI ms", "ratio", "bytes"],
        ([r[k] for k in columns] for r in rows),
        "- .1f .1f .1f .2f",
    )
    engine = named[0][1]
    print(
        "entropy stage (z, hyper-synthesis, indexes, y): ours (integers; h_s on the "
        f"{engine} engine, on the int8 one and on the NumPy one) vs CompressAI (C++ rANS, float "
        "h_s); goal ≤ 1.0"
    )
    entropy = ("picture", "entropy_ms", "entropy_int8_ms", "entropy_numpy_ms")
    table(
        ["picture", "ours ms", "h_s on int8 ms", "h_s on NumPy ms", "CompressAI ms", "ratio"],
        ([r[k] for k in (*entropy, "compressai_entropy_ms", "entropy0_ratio")] for r in rows),
        "- .1f .1f .1f .1f .2f",
    )
    print("h_s alone, on the engine auto picks, per set (products/MAC: its int8 planes × digits):")
    for i, (set_name, engine, per_mac) in enumerate(named):
        print(f"{set_name}: h_s on {engine}, {per_mac} int8 products a multiply-accumulate")
        keys = (f"entropy{i}_ms", f"h_s{i}_ms", f"h_s{i}_share")
        table(
            ["picture", "entropy ms", "of it: h_s ms", "h_s share", "CompressAI ms", "ratio"],
            (
                [
                    r["picture"],
                    *(r[k] for k in keys),
                    r["compressai_entropy_ms"],
                    r[f"entropy{i}_ratio"],
                ]
                for r in rows
            ),
            "- .1f .1f - .1f .2f",
            indent="  ",
        )
    print(f"{loadavg()} (at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
