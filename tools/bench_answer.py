"""``python -m wai_dispatch.tools.bench_answer``: answering a decode beside the decode itself
(the anchor, warm): the PNG at zlib levels 6, 1 (``png_level``'s default) and 0, level 6
optimised, the JSON answer's base64, raw RGB8; at 256×256 and 768×512, medians of
``--repeat``, interleaved. Goal: the answer ≤ 15% of the decode."""

from __future__ import annotations

import base64
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from wai_dispatch.codec.envelope import parse
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import to_png
from wai_dispatch.tools.bench_tiles import envelope_of
from wai_dispatch.tools.harness import loadavg, parser, table


def _png_optimized(rgb: Any) -> bytes:
    """Level 6 with Pillow's ``optimize`` pass, which the service's :func:`to_png` leaves out."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(buf, format="PNG", optimize=True, compress_level=6)
    return buf.getvalue()


ANSWERS: dict[str, Callable[[Any], bytes]] = {
    "PNG level 6": partial(to_png, level=6),
    "PNG level 6, optimize": _png_optimized,
    "PNG level 1 (default)": to_png,
    "PNG level 0 (stored)": partial(to_png, level=0),
    "PNG level 1 + base64 JSON": lambda rgb: base64.b64encode(to_png(rgb)),
    "raw RGB8 (octet-stream)": lambda rgb: rgb.tobytes(),
}


def run(repeat: int) -> list[tuple[str, float, dict[str, tuple[float, int]]]]:
    """Per picture: its name, the decode's median seconds, and per answer (median seconds,
    bytes)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="wai-bench-answer-") as tmp:
        decoder = Decoder.assemble(Path(tmp))
        pictures = {
            "256×256": parse((envelopes_dir() / "bmshj2018-demo-q3.json").read_bytes()),
            "768×512": envelope_of(decoder.set_store, "bmshj2018-demo-q3", 32, 48),
        }
        for name, envelope in pictures.items():
            prepared = decoder.prepare(envelope)
            rgb = decoder.decode(prepared).rgb  # warm
            decodes: list[float] = []
            costs: dict[str, list[float]] = {k: [] for k in ANSWERS}
            sizes: dict[str, int] = {}
            for _ in range(repeat):
                t0 = time.perf_counter()
                rgb = decoder.decode(prepared).rgb
                decodes.append(time.perf_counter() - t0)
                for key, fn in ANSWERS.items():
                    t0 = time.perf_counter()
                    out = fn(rgb)
                    took = time.perf_counter() - t0
                    costs[key].append(took)
                    sizes[key] = len(out)
            rows.append(
                (
                    name,
                    statistics.median(decodes),
                    {k: (statistics.median(v), sizes[k]) for k, v in costs.items()},
                )
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("answer", __doc__, quick="two repeats (smoke)")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args(argv)
    repeat = 2 if args.quick else args.repeat
    rows = run(repeat)
    print(f"{loadavg()}; medians of {repeat}")
    for name, decode_s, answers in rows:
        print(f"\n{name}: the decode (envelope → RGB8, warm) {decode_s * 1e3:.1f} ms")
        table(
            ["answer", "ms", "of decode", "KiB"],
            ([k, secs * 1e3, secs / decode_s, size / 1024] for k, (secs, size) in answers.items()),
            "- .2f .1% .0f",
            indent="  ",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
