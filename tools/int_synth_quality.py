"""``python -m wai_dispatch.tools.int_synth_quality``: the integer set's quality against its float
set at the same bitstream, on the pictures the demo weights never saw (``chelsea``, ``coffee``):
PSNR of the float decode (ONNX Runtime, RGB8) and of the integer decode (wai-ops/1), each against
the original picture, and their difference (docs/int-synth-set.md, "Quality"). With ``--against``
another integer set (by default the retired ``int-synth-demo-q3``), both sets' figures and, per
convolution, what the int8 graph engine makes of each program: its input's proven range and its
weights', the int8 products per multiply-accumulate (planes × digits), and whether the exactness
proof holds on each kernel MLAS may pick (docs/wai-ops.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import retired_dir, sets_dir
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.int8_digits import plane_ranges, weight_digits
from wai_dispatch.paths.waiops.int8_graph import PLANE_BITS, build_model, products_per_mac
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.service.decoding.results import to_rgb8
from wai_dispatch.tools.bmshj2018_model import load_model
from wai_dispatch.tools.bmshj2018_onnx import onnx_session
from wai_dispatch.tools.bmshj2018_symbols import encode_symbols
from wai_dispatch.tools.train_bmshj2018 import (
    HELD_OUT_IMAGES,
    TRAIN_IMAGES,
    load_image,
    psnr_rgb8,
)
from wai_dispatch.tools.wai_int_synth_set import PROGRAM_FILE, WEIGHTS_FILE

#: The bundled integer set, and the one it replaced (``--against``'s default).
BUNDLED = "int-synth-int8-units-demo-q3"
RETIRED = "int-synth-demo-q3"


def picture(name: str) -> np.ndarray:
    """A scikit-image sample as HxWx3 uint8; a grey one (``camera``) as three equal channels."""
    if name.endswith("]") or name in HELD_OUT_IMAGES:
        return load_image(name)
    import skimage.data

    img = np.asarray(getattr(skimage.data, name)())
    if img.ndim == 2 and img.dtype == np.uint8:
        return np.ascontiguousarray(np.repeat(img[:, :, None], 3, axis=2))
    return load_image(name)


def measure(
    int_set: Path,
    float_set: Path,
    checkpoint: Path | None = None,
    pictures: Sequence[str] = HELD_OUT_IMAGES,
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
    for name in pictures:
        if name in TRAIN_IMAGES:
            raise SystemExit(f"{name}: a picture the demo weights were trained on, not held out")
        image = picture(name)
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


def _program(int_set: Path) -> Program:
    return load_program(
        (int_set / PROGRAM_FILE).read_bytes(),
        (int_set / WEIGHTS_FILE).read_bytes(),
        rgb8_output=True,
    )


#: What each kernel MLAS may pick for ``ConvInteger``'s u8×s8 products needs, from the largest
#: |plane| ``p`` and the longest GEMM row ``k`` (docs/wai-ops.md, "The int8 graph engine").
KERNELS: tuple[tuple[str, Callable[[int, int], bool]], ...] = (
    ("SSE4.1", lambda p, k: 255 * p < 2**31),  # each product
    ("AVX2/AVX-512BW", lambda p, k: 2 * 255 * p <= 32767),  # a saturating int16 pair
    ("VNNI/AMX", lambda p, k: 255 * p * k < 2**31),  # every raw partial sum
    ("ARM64", lambda p, k: 255 * (p + 128) < 2**16),  # the sign-flipped operand's product
)


@dataclass(frozen=True)
class Units:
    """One convolution as the int8 graph engine runs it."""

    name: str
    input: tuple[int, int]  # its input's proven range
    weights: tuple[int, int]
    planes: int
    digits: int
    per_mac: float  # int8 products a multiply-accumulate (digits read only where non-zero)
    macs: int  # its multiply-accumulates, relative to the others'
    kernels: dict[str, bool]  # each kernel's verdict


def int8_units(program: Program) -> list[Units]:
    """Per convolution, what the int8 graph engine makes of it: its input's proven range and its
    weights', its 7-bit planes and base-256 digits, their int8 products per multiply-accumulate
    (per input position: the engine's own count over ``Ci·Co·k²``), the share of the program's
    multiply-accumulates it holds (at 2× upsampling a layer, each reads 4× the positions of the
    last), and each kernel's verdict."""
    _, products = build_model(program)  # NotGraphExact: the engine refuses the program
    rows: list[Units] = []
    for op in program.operations:
        if op.op not in ("conv2d", "conv_transpose2d"):
            continue
        lo, hi = program.bounds[op.inputs[0]]
        w = op.params["weight"]
        ci = w.shape[0] if op.op == "conv_transpose2d" else w.shape[1]
        macs = int(w.size)  # Ci·Co·k² per input position
        planes = plane_ranges(int(lo.min()), int(hi.max()), PLANE_BITS)
        p = max(max(-a, b) for a, b in planes)
        k = ci * op.attrs["kernel"] ** 2  # the longest row, at most
        rows.append(
            Units(
                op.name,
                (int(lo.min()), int(hi.max())),
                (int(w.min()), int(w.max())),
                len(planes),
                len(weight_digits(w)[1]),
                products[op.name] / macs,
                macs * 4 ** len(rows),
                {name: ok(p, k) for name, ok in KERNELS},
            )
        )
    return rows


def _report(label: str, int_set: Path, rows: list[dict[str, float]]) -> None:
    program = _program(int_set)
    print(
        f"{label}: {int_set.name} ({program.operation_count} operations, largest bound "
        f"{program.largest:,}, float32-exact {program.float32_exact})"
    )
    for row in rows:
        print(
            f"  {row['picture']:8s} {row['bpp']:.3f} bpp  float {row['float_psnr']:.3f} dB  "
            f"integer {row['int_psnr']:.3f} dB  loss {row['loss_db']:+.3f} dB  "
            f"(integer vs float {row['float_vs_int_psnr']:.2f} dB)"
        )
    units = int8_units(program)
    total = sum(u.macs for u in units)
    mean = products_per_mac(program, build_model(program)[1])  # the chooser's count
    print(f"  int8 products a multiply-accumulate: {mean:.3f} over the synthesis")
    for u in units:
        verdicts = ", ".join(f"{k} {'yes' if ok else 'NO'}" for k, ok in u.kernels.items())
        print(
            f"  {u.name:8s} input {list(u.input)}  weights {list(u.weights)}  planes {u.planes}"
            f" × digits {u.digits}: {u.per_mac:.3f} products a MAC ({100 * u.macs / total:.1f}% "
            f"of MACs); exact on {verdicts}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.int_synth_quality")
    parser.add_argument("--int-set", type=Path, default=sets_dir() / BUNDLED)
    parser.add_argument("--float-set", type=Path, default=sets_dir() / "bmshj2018-demo-q3")
    parser.add_argument(
        "--against",
        type=Path,
        nargs="?",
        const=retired_dir() / RETIRED,
        help=f"another integer set to compare with (alone: the retired {RETIRED})",
    )
    parser.add_argument(
        "--picture",
        action="append",
        help="a scikit-image sample the weights never saw (repeatable; a grey one as three "
        f"equal channels); default: {', '.join(HELD_OUT_IMAGES)}",
    )
    args = parser.parse_args(argv)
    pictures = tuple(args.picture or HELD_OUT_IMAGES)
    sets = [("set", args.int_set)] + ([("against", args.against)] if args.against else [])
    measured = {label: measure(path, args.float_set, pictures=pictures) for label, path in sets}
    for label, path in sets:
        _report(label, path, measured[label])
    if args.against:
        for new, old in zip(measured["set"], measured["against"], strict=True):
            print(
                f"{new['picture']:8s} integer PSNR {new['int_psnr'] - old['int_psnr']:+.3f} dB "
                f"against the other set"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
