"""``python -m wai_dispatch.tools.hyperprior_quality``: the integer hyper-synthesis against the
anchor (docs/bmshj2018-hyperprior-set.md, "Quality"): on the held-out photographs, bpp and RGB8
PSNR of our coding beside CompressAI's own float ``ScaleHyperprior`` with the same weights, both
on the picture padded to 64. Our reconstruction runs CompressAI's ``g_s`` on our latent, so the
rows differ only by the entropy stage. ``--against DIR``: the same pictures coded with another
hyperprior set of the same weights too (today's, against the ``int8-units`` profile's), its bytes
and bpp beside ours and the rate change between them (their y symbols, hence PSNR, are the
same: only the scales ``h_s`` gives, and so the code lengths, differ). Then, per set, each of
``h_s``'s convolutions as the int8 graph engine runs it: its input's and weights' ranges, its
7-bit planes × base-256 digits and int8 products a multiply-accumulate, each kernel's verdict
(``int_synth_quality``'s count).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths.waiops.int8_graph import build_model, products_per_mac
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.encoder import pad
from wai_dispatch.tools.hyperprior_encode import (
    DEMO_CHECKPOINT,
    HyperAnalysis,
    encode_with,
    load_hyper_model,
    open_folder,
)
from wai_dispatch.tools.int_synth_quality import int8_units
from wai_dispatch.tools.train_bmshj2018 import (
    HELD_OUT_IMAGES,
    load_image,
    pad_to,
    psnr_rgb8,
    rgb8_of,
    to_tensor,
)

SET_NAME = "bmshj2018-hyperprior-int8-units-demo-q3"


@torch.no_grad()
def measure(
    set_dir: Path, checkpoint: Path, images: Sequence[str], against: Path | None = None
) -> list[dict[str, Any]]:
    files = open_folder(set_dir)
    stage = HyperStage.of(files)
    assert stage is not None
    other = HyperStage.of(open_folder(against)) if against is not None else None
    net = load_hyper_model(checkpoint, files.facts.quality or 3)
    analysis = HyperAnalysis(net)
    rows = []
    for name in images:
        img = load_image(name)
        h, w = img.shape[:2]
        padded = pad(img, 64)
        payload = encode_with(analysis, stage, padded)
        result = stage.run(payload, limits=Limits())
        ours = rgb8_of(net.g_s(torch.from_numpy(result.latent)), h, w)
        enc = net.compress(pad_to(to_tensor(img), 64))
        nbytes = sum(len(s) for group in enc["strings"] for s in group)
        theirs = rgb8_of(net.decompress(enc["strings"], enc["shape"])["x_hat"], h, w)
        row = {
            "picture": name,
            "height": h,
            "width": w,
            "ours_bytes": len(payload),
            "ours_bpp": round(len(payload) * 8 / (h * w), 4),
            "ours_psnr": round(psnr_rgb8(img, ours), 3),
            "compressai_bytes": nbytes,
            "compressai_bpp": round(nbytes * 8 / (h * w), 4),
            "compressai_psnr": round(psnr_rgb8(img, theirs), 3),
        }
        row["rate_change_pct"] = round(100 * (row["ours_bytes"] / nbytes - 1), 2)
        row["psnr_change_db"] = round(row["ours_psnr"] - row["compressai_psnr"], 3)
        if other is not None:
            theirs_payload = encode_with(analysis, other, padded)
            mine = other.run(theirs_payload, limits=Limits()).latent
            row["against_bytes"] = len(theirs_payload)
            row["against_bpp"] = round(len(theirs_payload) * 8 / (h * w), 4)
            row["against_same_latent"] = bool((mine == result.latent).all())
            row["rate_vs_against_pct"] = round(100 * (len(payload) / len(theirs_payload) - 1), 2)
        rows.append(row)
    return rows


def units(set_dir: Path) -> list[dict[str, Any]]:
    """``h_s`` of the set in ``set_dir`` as the int8 graph engine runs it: one row a convolution
    and one for the whole program."""
    stage = HyperStage.of(open_folder(set_dir))
    assert stage is not None
    program = stage.program
    rows: list[dict[str, Any]] = [
        {"set": set_dir.name, **vars(u), "per_mac": round(u.per_mac, 3)}
        for u in int8_units(program)
    ]
    per_mac = products_per_mac(program, build_model(program)[1])
    rows.append(
        {
            "set": set_dir.name,
            "largest": program.largest,
            "float32_exact": program.float32_exact,
            "per_mac": round(per_mac, 3),
        }
    )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.hyperprior_quality")
    parser.add_argument("--set", type=Path, default=sets_dir() / SET_NAME)
    parser.add_argument("--checkpoint", type=Path, default=DEMO_CHECKPOINT)
    parser.add_argument("--against", type=Path, help="another hyperprior set (same weights)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = measure(args.set, args.checkpoint, HELD_OUT_IMAGES, args.against)
    for row in rows:
        print(json.dumps(row))
    if args.against is not None:
        ours, theirs = sum(r["ours_bytes"] for r in rows), sum(r["against_bytes"] for r in rows)
        pixels = sum(r["height"] * r["width"] for r in rows)
        print(
            json.dumps(
                {
                    "pictures": len(rows),
                    "ours_bpp": round(ours * 8 / pixels, 4),
                    "against_bpp": round(theirs * 8 / pixels, 4),
                    "rate_vs_against_pct": round(100 * (ours / theirs - 1), 2),
                }
            )
        )
    for folder in (args.set, *([args.against] if args.against is not None else [])):
        for row in units(folder):
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
