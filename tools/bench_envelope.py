"""``python -m wai_dispatch.tools.bench_envelope``: the whole envelope (JSON bytes) → RGB8 through
``Decoder.decode``, beside CompressAI's ``net.decompress()`` of the same picture taken to RGB8
(the anchor, torch on the CPU, same thread count), at 256×256 and 768×512.

Warm: both in this process, interleaved, best of ``--repeats``. Cold: each in a fresh process,
interpreter start to the RGB8 of one decode (ours on a data directory already holding the set
and its prepared graph, as a restarted service finds it), best of ``--cold``. Ratios are
ours ÷ anchor, in time."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload
from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths.onnx import configure_thread_pool
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.tools.bench_decode import _model, picture_latent
from wai_dispatch.tools.harness import best_of_interleaved, loadavg, met, parser, table

SET = "bmshj2018-demo-q3"
SIZES = ((256, 256), (512, 768))  # (height, width)
QUICK_SIZES = ((64, 64),)
GOAL = 0.35


def rgb8(x_hat: Any) -> np.ndarray:
    """CompressAI's ``x_hat`` (1×3×H×W float in [0, 1]) as H×W×3 uint8, as a user wants it."""
    out: np.ndarray = (x_hat.clamp(0, 1)[0].permute(1, 2, 0) * 255).round().byte().numpy()
    return out


def pictures(sizes: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """Per size: CompressAI's compressed picture and our envelope (JSON bytes) of the same
    symbols, coded with the bundled set's tables (the demo checkpoint's own)."""
    import torch

    net = _model(None)
    eb = net.entropy_bottleneck
    folder = sets_dir() / SET
    manifest = Manifest.from_bytes((folder / "set.json").read_bytes())
    tables = EntropyTables.from_json((folder / str(manifest.facts.tables)).read_bytes())
    theirs = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb.quantiles[:, 0, 1]
    )
    assert tables == theirs, "the bundled set's tables are not the demo checkpoint's"
    rows = []
    for height, width in sizes:
        x, symbols = picture_latent(net, height, width)
        with torch.no_grad():
            out = net.compress(x)
        body = payload.encode(symbols, tables)
        envelope = Envelope(capability=manifest.capability, payload=body, set=manifest.digest)
        rows.append(
            {
                "height": height,
                "width": width,
                "envelope": envelope.to_json(),
                "strings": out["strings"],
                "shape": list(out["shape"]),
            }
        )
    return rows


def warm(rows: list[dict[str, Any]], data_dir: Path, repeats: int) -> list[dict[str, Any]]:
    import torch

    decoder = Decoder.assemble(data_dir)
    net = _model(None)
    out = []
    for row in rows:
        body = row["envelope"]

        def ours(body: bytes = body) -> np.ndarray:
            return decoder.decode(body).rgb

        def theirs(row: dict[str, Any] = row) -> np.ndarray:
            with torch.no_grad():
                return rgb8(net.decompress(row["strings"], row["shape"])["x_hat"])

        a, b = ours(), theirs()
        same = float(np.mean(np.abs(a.astype(np.int16) - b.astype(np.int16))))
        best = best_of_interleaved({"ours": ours, "compressai": theirs}, repeats)
        out.append(
            {
                **_label(row),
                "ours": best["ours"],
                "compressai": best["compressai"],
                "mean_abs_diff": same,
            }
        )
    return out


def _label(row: dict[str, Any]) -> dict[str, Any]:
    return {"picture": f"{row['width']}×{row['height']}", "bytes": len(row["envelope"])}


_COLD_OURS = """
import sys, time
t0 = time.perf_counter()
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.settings import load
body = open(sys.argv[2], "rb").read()
decoder = Decoder.assemble(**load(data_dir=sys.argv[1]).decoder_args())
t1 = time.perf_counter()
decoder.decode(body).rgb
print(t1 - t0, time.perf_counter() - t1)
"""

_COLD_THEIRS = """
import sys, time, pickle
t0 = time.perf_counter()
import torch
from wai_dispatch.tools.bench_decode import _model
from wai_dispatch.tools.bench_envelope import rgb8
torch.set_num_threads(int(sys.argv[2]))
net = _model(None)
strings, shape = pickle.loads(open(sys.argv[1], "rb").read())
t1 = time.perf_counter()
with torch.no_grad():
    rgb8(net.decompress(strings, shape)["x_hat"])
print(t1 - t0, time.perf_counter() - t1)
"""


def cold(
    rows: list[dict[str, Any]], data_dir: Path, threads: int, repeats: int
) -> list[dict[str, Any]]:
    """Per picture: the best wall time from spawning a fresh interpreter to its exit after one
    decode, ours and theirs, interleaved; and inside that, the start (imports, open) and the
    first decode."""

    env = {**os.environ, "WAI_DATA_DIR": str(data_dir), "WAI_ORT_THREADS": str(threads)}
    out = []
    for row in rows:
        body_file, strings_file = data_dir / "bench.json", data_dir / "bench.pickle"
        body_file.write_bytes(row["envelope"])
        strings_file.write_bytes(pickle.dumps((row["strings"], row["shape"])))
        best: dict[str, tuple[float, float, float]] = {}
        for _ in range(repeats):
            for name, argv in (
                ("ours", ["-c", _COLD_OURS, str(data_dir), str(body_file)]),
                ("compressai", ["-c", _COLD_THEIRS, str(strings_file), str(threads)]),
            ):
                t = time.perf_counter()
                got = subprocess.run(
                    [sys.executable, *argv], env=env, capture_output=True, text=True, check=True
                ).stdout.split()
                wall = time.perf_counter() - t
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, float(got[-2]), float(got[-1]))
        out.append({**_label(row), **best})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("envelope", __doc__, threads=2, repeats=7, quick="64×64, one repetition (smoke)")
    p.add_argument("--cold", type=int, default=3, help="cold: best of N fresh processes (3)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.cold = 1, 1
    import torch

    torch.set_num_threads(args.threads)
    configure_thread_pool(args.threads)
    rows = pictures(QUICK_SIZES if args.quick else SIZES)
    with tempfile.TemporaryDirectory(prefix="wai-bench-envelope-") as tmp:
        data_dir = Path(tmp)
        hot = warm(rows, data_dir, args.repeats)  # also installs the set and its prepared graph
        fresh = cold(rows, data_dir, args.threads, args.cold)
    print(
        f"whole envelope (JSON) → RGB8 through Decoder.decode, beside CompressAI "
        f"decompress() → RGB8 of the same picture; {args.threads} threads each; "
        f"{loadavg()}"
    )
    print(f"ratio: ours ÷ CompressAI, in time (below 1: faster); goal warm ≤ {GOAL}×")
    table_rows = []
    for h, c in zip(hot, fresh, strict=True):
        w, k = h["ours"] / h["compressai"], c["ours"][0] / c["compressai"][0]
        table_rows.append([h["picture"], str(h["bytes"]), h["ours"] * 1e3, h["compressai"] * 1e3])
        table_rows[-1] += [w, met(w <= GOAL), c["ours"][0], c["compressai"][0], k]
        table_rows[-1].append(h["mean_abs_diff"])
    head = ["picture", "envelope B", "warm ours ms", "CompressAI ms", "ratio", "goal"]
    head += ["cold ours s", "CompressAI s", "ratio", "mean |Δ| vs theirs"]
    table(head, table_rows, "- - .1f .1f .2f - .2f .2f .2f .2f")
    print("cold, inside the process (start: imports and open/load; then the first decode):")
    for c in fresh:
        print(
            f"  {c['picture']:>9}: ours start {c['ours'][1]:.2f} s + first decode "
            f"{c['ours'][2] * 1e3:.0f} ms; CompressAI start {c['compressai'][1]:.2f} s + "
            f"first decode {c['compressai'][2] * 1e3:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
