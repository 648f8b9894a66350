"""``python -m wai_dispatch.tools.bench_hyperprior``: the whole hyperprior decode, ``WAIH`` bytes →
RGB8, beside CompressAI's float ``ScaleHyperprior.decompress()`` (same weights and threads), at
256×256 and 768×512; and the entropy stage alone (all of ``decompress()`` but ``g_s``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter, configure_thread_pool
from wai_dispatch.paths.waiops import choose
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

SET_NAME = "bmshj2018-hyperprior-demo-q3"


def run(threads: int, repeats: int) -> tuple[str, list[dict[str, Any]]]:
    import torch

    torch.set_num_threads(threads)
    configure_thread_pool(threads)
    files = open_folder(sets_dir() / SET_NAME)
    stage = HyperStage.of(files)
    assert stage is not None
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

        def entropy(body: bytes = body) -> Any:
            return stage.run(body, limits=limits)

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

        best = best_of_interleaved(
            {
                "ours": ours,
                "compressai": theirs,
                "entropy": entropy,
                "entropy_numpy": entropy_numpy,
                "entropy_int8": entropy_int8,
                "compressai_entropy": theirs_entropy,
            },
            repeats,
        )
        ms = {f"{name}_ms": seconds * 1e3 for name, seconds in best.items()}
        theirs_bytes = sum(len(s) for g in out["strings"] for s in g)
        rows.append(
            {
                "picture": f"{width}×{height}",
                **ms,
                "ratio": best["ours"] / best["compressai"],  # bytes: ours / CompressAI
                "entropy_ratio": best["entropy"] / best["compressai_entropy"],
                "bytes": f"{len(body)} / {theirs_bytes}",
            }
        )
    return choose.engine_name(stage.engines.runner()), rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parser("hyperprior", __doc__, threads=2, repeats=5).parse_args(argv)
    engine, rows = run(args.threads, args.repeats)
    print(
        f"hyperprior decode WAIH → RGB8, bmshj2018-hyperprior q3 (demo weights), {args.threads} "
        f"threads, best of {args.repeats}, interleaved; {loadavg()}"
    )
    columns = ("picture", "ours_ms", "entropy_ms", "compressai_ms", "ratio", "bytes")
    table(
        ["picture", "ours (ORT cpu) ms", "of it: entropy ms", "CompressAI ms", "ratio", "bytes"],
        ([r[k] for k in columns] for r in rows),
        "- .1f .1f .1f .2f",
    )
    print(
        "entropy stage (z, hyper-synthesis, indexes, y): ours (integers; h_s on the "
        f"{engine} engine, on the int8 one and on the NumPy one) vs CompressAI (C++ rANS, float "
        "h_s); goal ≤ 1.0"
    )
    entropy = ("picture", "entropy_ms", "entropy_int8_ms", "entropy_numpy_ms")
    table(
        ["picture", "ours ms", "h_s on int8 ms", "h_s on NumPy ms", "CompressAI ms", "ratio"],
        ([r[k] for k in (*entropy, "compressai_entropy_ms", "entropy_ratio")] for r in rows),
        "- .1f .1f .1f .1f .2f",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
