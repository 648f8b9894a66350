"""``python -m wai_dispatch.tools.int_synth_quality``: the integer set's quality against its float
set at the same bitstream, on the pictures the demo weights never saw (``chelsea``, ``coffee``):
PSNR of the float decode (ONNX Runtime, RGB8) and of the integer decode (wai-ops/1), each against
the original picture, and their difference (docs/int-synth-set.md, "Quality")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.service.decoding.results import to_rgb8
from wai_dispatch.tools.bmshj2018_model import load_model
from wai_dispatch.tools.bmshj2018_onnx import onnx_session
from wai_dispatch.tools.bmshj2018_symbols import encode_symbols
from wai_dispatch.tools.train_bmshj2018 import HELD_OUT_IMAGES, load_image, psnr_rgb8
from wai_dispatch.tools.wai_int_synth_set import PROGRAM_FILE, WEIGHTS_FILE


def measure(
    int_set: Path, float_set: Path, checkpoint: Path | None = None
) -> list[dict[str, float]]:
    import torch
    import torch.nn.functional as F

    model, _ = load_model(checkpoint=checkpoint, pretrained=False, quality=3)
    tables = EntropyTables.from_json((float_set / "cdfs_q3.json").read_bytes())
    session = onnx_session(
        (float_set / "decoder.onnx").read_bytes(), (float_set / "decoder.weights").read_bytes()
    )
    program = load_program(
        (int_set / PROGRAM_FILE).read_bytes(),
        (int_set / WEIGHTS_FILE).read_bytes(),
        rgb8_output=True,
    )
    engine = Engine(program)
    rows = []
    for name in HELD_OUT_IMAGES:
        image = load_image(name)
        h, w = image.shape[:2]
        x = torch.from_numpy(image).permute(2, 0, 1)[None].float().div(255.0)
        pad = F.pad(x, (0, (-w) % 16, 0, (-h) % 16), mode="replicate")
        padded = np.ascontiguousarray((pad[0].permute(1, 2, 0) * 255).round().byte().numpy())
        symbols_t, _ = encode_symbols(model, padded)
        symbols = symbols_t.numpy()
        nbytes = len(codec_payload.encode(symbols, tables))
        latent = codec_payload.latent(symbols, tables)
        float_rgb = to_rgb8(session.run(["x_hat"], {"latent": latent})[0])[:h, :w]
        int_rgb = engine.run(symbols)[0].transpose(1, 2, 0).astype(np.uint8)[:h, :w]
        pf, pi = psnr_rgb8(image, float_rgb), psnr_rgb8(image, int_rgb)
        rows.append(
            {
                "picture": name,
                "bpp": 8.0 * nbytes / (h * w),
                "float_psnr": pf,
                "int_psnr": pi,
                "loss_db": pf - pi,
                "float_vs_int_psnr": psnr_rgb8(float_rgb, int_rgb),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.int_synth_quality")
    parser.add_argument("--int-set", type=Path, default=sets_dir() / "int-synth-demo-q3")
    parser.add_argument("--float-set", type=Path, default=sets_dir() / "bmshj2018-demo-q3")
    args = parser.parse_args(argv)
    for row in measure(args.int_set, args.float_set):
        print(
            f"{row['picture']:8s} {row['bpp']:.3f} bpp  float {row['float_psnr']:.3f} dB  "
            f"integer {row['int_psnr']:.3f} dB  loss {row['loss_db']:+.3f} dB  "
            f"(integer vs float {row['float_vs_int_psnr']:.2f} dB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
