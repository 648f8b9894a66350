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
from wai_dispatch.tools.harness import best_of_interleaved, loadavg, parser
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
        rows.append(
            {
                "picture": f"{width}×{height}",
                **{f"{name}_ms": seconds * 1e3 for name, seconds in best.items()},
                "payload_bytes": len(body),
                "compressai_bytes": sum(len(s) for g in out["strings"] for s in g),
            }
        )
    return choose.engine_name(stage.engines.runner()), rows


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("hyperprior", __doc__)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    engine, rows = run(args.threads, args.repeats)
    print(
        f"hyperprior decode WAIH → RGB8, bmshj2018-hyperprior q3 (demo weights), {args.threads} "
        f"threads, best of {args.repeats}, interleaved; {loadavg()}"
    )
    print(
        f"{'picture':>9} | {'ours (ORT cpu)':>15} | {'of it: entropy':>15} | "
        f"{'CompressAI':>12} | {'ratio':>6} | bytes ours / CompressAI"
    )
    for r in rows:
        print(
            f"{r['picture']:>9} | {r['ours_ms']:12.1f} ms | {r['entropy_ms']:12.1f} ms | "
            f"{r['compressai_ms']:9.1f} ms | {r['ours_ms'] / r['compressai_ms']:6.2f} | "
            f"{r['payload_bytes']} / {r['compressai_bytes']}"
        )
    print(
        "entropy stage (z, hyper-synthesis, indexes, y): ours (integers; h_s on the "
        f"{engine} engine, on the int8 one and on the NumPy one) vs CompressAI (C++ rANS, float "
        "h_s); goal ≤ 1.0"
    )
    print(
        f"{'picture':>9} | {'ours':>12} | {'h_s on int8':>12} | {'h_s on NumPy':>12} | "
        f"{'CompressAI':>12} | {'ratio':>6}"
    )
    for r in rows:
        print(
            f"{r['picture']:>9} | {r['entropy_ms']:9.1f} ms | {r['entropy_int8_ms']:9.1f} ms | "
            f"{r['entropy_numpy_ms']:9.1f} ms | {r['compressai_entropy_ms']:9.1f} ms | "
            f"{r['entropy_ms'] / r['compressai_entropy_ms']:6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
