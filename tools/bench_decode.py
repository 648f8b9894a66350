"""``python -m wai_dispatch.tools.bench_decode``: the whole decode, payload bytes → RGB8, on the
ONNX Runtime CPU path, beside CompressAI's own ``net.decompress()`` (torch on the CPU, same
thread count), in the same run, at 256×256 and 768×512; and the peak memory of a 768×512 decode."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from wai_dispatch.codec import payload
from wai_dispatch.codec.tables import EntropyTables, laplacian_tables
from wai_dispatch.conformance import weights_dir
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter, configure_thread_pool
from wai_dispatch.service.decoding.results import to_rgb8
from wai_dispatch.tools.bmshj2018_model import load_model
from wai_dispatch.tools.harness import (
    best_of_interleaved,
    fresh,
    loadavg,
    memory_kib,
    met,
    parser,
    table,
)
from wai_dispatch.tools.onnx_synthesis import g_s_layers, memory_set, random_layers

SIZES = ((256, 256), (512, 768))  # (height, width)
GOAL = 0.35


def _picture(height: int, width: int) -> np.ndarray:
    """A natural picture of the size asked (scikit-image's astronaut, resized)."""
    import skimage.data
    from PIL import Image

    # scikit-image leaves astronaut() unannotated: an RGB uint8 array
    astronaut: Callable[[], npt.NDArray[np.uint8]] = skimage.data.astronaut
    img = Image.fromarray(astronaut()).resize((width, height), Image.Resampling.LANCZOS)
    return np.asarray(img)


def _model(checkpoint: str | None) -> Any:
    path = checkpoint or str(weights_dir() / "bmshj2018-demo-q3.pt")
    return load_model(checkpoint=path, pretrained=False, quality=3)[0]


def picture_latent(net: Any, height: int, width: int) -> tuple[Any, np.ndarray]:
    """:func:`_picture` as ``net``'s input tensor, and its quantized latent (``net``'s analysis)."""
    import torch

    x = torch.from_numpy(_picture(height, width).copy()).permute(2, 0, 1)[None] / 255.0
    with torch.no_grad():
        y = net.g_a(x)
    return x, torch.round(y - net.entropy_bottleneck._get_medians()).to(torch.int32).numpy()


def run(
    threads: int, repeats: int, checkpoint: str | None, sizes: Sequence[tuple[int, int]] = SIZES
) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    configure_thread_pool(threads)
    net = _model(checkpoint)
    eb = net.entropy_bottleneck
    tables = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb.quantiles[:, 0, 1]
    )
    set_files = memory_set(g_s_layers(net.g_s))
    adapter = OnnxRuntimeAdapter()
    rows = []
    for height, width in sizes:
        x, symbols = picture_latent(net, height, width)
        with torch.no_grad():
            out = net.compress(x)
        body = payload.encode(symbols, tables)

        def ours(body: bytes = body) -> np.ndarray:
            latent = payload.latent(payload.decode(body, tables), tables)
            return to_rgb8(adapter.run(SynthesisJob(set_files, latent)))

        def theirs(out: dict[str, Any] = out) -> Any:
            with torch.no_grad():
                return net.decompress(out["strings"], out["shape"])["x_hat"]

        best = best_of_interleaved({"ours": ours, "compressai": theirs}, repeats)
        rows.append(
            {
                "picture": f"{width}×{height}",
                "ours_ms": best["ours"] * 1e3,
                "compressai_ms": best["compressai"] * 1e3,
                "ratio": best["ours"] / best["compressai"],
                "payload_bytes": len(body),
                "compressai_bytes": len(out["strings"][0][0]),
            }
        )
    return {"threads": threads, "repeats": repeats, "rows": rows}


def peak_worker() -> dict[str, Any]:
    """One 768×512 decode in a fresh process; its peak resident memory (VmHWM)."""

    set_files = memory_set(random_layers())
    tables = laplacian_tables(192, seed=0)
    symbols = np.zeros((1, 192, 32, 48), np.int32)
    body = payload.encode(symbols, tables)
    before = memory_kib()["VmHWM"]
    latent = payload.latent(payload.decode(body, tables), tables)
    to_rgb8(OnnxRuntimeAdapter().run(SynthesisJob(set_files, latent)))
    return {"before_kib": before, "peak_kib": memory_kib()["VmHWM"]}


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("decode", __doc__, threads=2, repeats=7, quick="64×64, 1 repeat (a smoke run)")
    p.add_argument("--checkpoint", help="a CompressAI state dict (default: the demo one)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats = 1
    result = run(args.threads, args.repeats, args.checkpoint, ((64, 64),) if args.quick else SIZES)
    print(
        f"decode payload → RGB8, bmshj2018-factorized q3 (demo weights), {args.threads} "
        f"threads, best of {args.repeats}, interleaved; {loadavg()}"
    )
    print(f"ratio: ours ÷ CompressAI, in time (below 1: faster); goal ≤ {GOAL}× (issue 18)")
    table(
        ["picture", "ours (ORT cpu) ms", "CompressAI ms", "ratio", "goal"],
        (
            [r["picture"], r["ours_ms"], r["compressai_ms"], r["ratio"], met(r["ratio"] <= GOAL)]
            for r in result["rows"]
        ),
        "- .1f .1f .2f",
    )
    mem = fresh(peak_worker)
    print(
        f"peak memory of one 768×512 decode in a fresh process: {mem['peak_kib'] / 1024:.0f} "
        f"MiB VmHWM (after imports: {mem['before_kib'] / 1024:.0f} MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
