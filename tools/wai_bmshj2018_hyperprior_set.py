"""Write a ``wai.neural.bmshj2018_hyperprior`` parameter set (docs/bmshj2018-hyperprior-set.md)
from a CompressAI ``ScaleHyperprior`` checkpoint: the main synthesis ``g_s`` with the bmshj2018
set's float programs, and the entropy stage's tables, the ``wai-ops/1`` hyper-synthesis
(tools/hyperprior_ptq.py) and its scale-index table, the usage statement and one payload.

Run: ``python -m wai_dispatch.tools.wai_bmshj2018_hyperprior_set --out DIR`` (options:
``--help``). Exit status 2 when the set is refused; the output directory is then left as it was.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import blake3
import numpy as np
import torch

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.paths.waiops import choose
from wai_dispatch.paths.waiops.errors import WaiOpsError
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.service.decoding.hyperprior import HyperStage, read_thresholds
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools import hyperprior_ptq
from wai_dispatch.tools.bmshj2018_model import (
    TABLES_UPDATE_FACT,
    SetWriterError,
    model_architecture,
    plain_synthesis,
    update_tables,
)
from wai_dispatch.tools.bmshj2018_onnx import (
    export_onnx,
    json_bytes,
    weights_blob,
)
from wai_dispatch.tools.bmshj2018_symbols import (
    PICTURE_SIZE,
    check_plain_synthesis,
    payload_picture,
)
from wai_dispatch.tools.bmshj2018_symbols import crops as bmshj2018_crops
from wai_dispatch.tools.hyperprior_encode import (
    DEMO_CHECKPOINT,
    HyperAnalysis,
    architecture,
    encode_with,
    read_hyper_model,
)
from wai_dispatch.tools.int_synth_exact import ExactConv
from wai_dispatch.tools.set_folder import write_from, write_set_folder, writer_main
from wai_dispatch.tools.set_writer_options import DEFAULT_SEED, DEMO_QUALITY
from wai_dispatch.tools.set_writer_options import hyperprior_parser as build_parser
from wai_dispatch.tools.wai_bmshj2018_npu_set import (
    UPSAMPLING,
    check_float_programs,
    float_programs,
    usage,
)

CAPABILITY = "wai.neural.bmshj2018_hyperprior"
SET_VERSION = "1"
PROGRAM_FILE = "hyper_synthesis.wai-ops.json"
WEIGHTS_FILE = "hyper_synthesis.safetensors"
CALIBRATION_SEED = 2019  # Ballé, Johnston, Minnen: integer networks (ICLR 2019)
CALIBRATION_CROPS = 4
CALIBRATION_CROP = 256
CHECK_SEED = 1802


def hs_weights(model: Any) -> dict[str, np.ndarray]:
    state = model.state_dict()
    out = {}
    for name, i in (("deconv1", 0), ("deconv2", 2), ("conv3", 4)):
        out[f"{name}.weight"] = state[f"h_s.{i}.weight"].detach().numpy().astype(np.float32)
        out[f"{name}.bias"] = state[f"h_s.{i}.bias"].detach().numpy().astype(np.float32)
    return out


def calibrate(
    analysis: HyperAnalysis,
    weights: dict[str, np.ndarray],
    symbol_range: tuple[int, int],
    crops: int = CALIBRATION_CROPS,
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Per-channel largest activation after h_s's first two ReLUs over crops of the training
    pictures (exact arithmetic: the same bits on every CPU), and the crops' y latents (the
    plain synthesis's check latents)."""
    rng = np.random.default_rng(CALIBRATION_SEED)
    d1 = ExactConv(weights["deconv1.weight"], weights["deconv1.bias"], "transposed")
    d2 = ExactConv(weights["deconv2.weight"], weights["deconv2.bias"], "transposed")
    stats: dict[str, np.ndarray] = {}
    ys = []
    medians = analysis.z_medians.reshape(1, -1, 1, 1)
    for crop in bmshj2018_crops(rng, crops, CALIBRATION_CROP):
        y, z_frac = analysis.latents(crop)
        ys.append(y)
        z_hat = np.clip(np.rint(z_frac), *symbol_range) + medians
        a1 = np.maximum(d1(z_hat), 0.0)
        a2 = np.maximum(d2(a1), 0.0)
        for key, a in (("a1", a1), ("a2", a2)):
            mx = a.max(axis=(0, 2, 3))
            stats[key] = mx if key not in stats else np.maximum(stats[key], mx)
    return stats, ys


def _check_latents(ys: list[np.ndarray], seed: int = CHECK_SEED) -> Iterator[Any]:
    for y in ys[:3]:
        yield torch.from_numpy(np.rint(y).astype(np.float32))
    spread = np.concatenate([np.rint(y) for y in ys]).std(axis=(0, 2, 3))
    rng = np.random.default_rng(seed)
    for shape, scale in (((16, 16), 1.0), ((12, 20), 3.0)):
        draw = rng.normal(size=(1, spread.size, *shape)) * (scale * spread + 0.5)[:, None, None]
        yield torch.from_numpy(np.rint(draw).astype(np.float32))


def write_set(
    out_dir: str | os.PathLike[str],
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    quality: int = DEMO_QUALITY,
    seed: int = DEFAULT_SEED,
    licence: str | None = None,
    name: str | None = None,
    overwrite: bool = False,
    update_quantiles: bool = False,
    coreml: bool = True,
    profile: str = "default",
    log: Callable[[str], None] | None = None,
) -> Path:
    """Write the set into ``out_dir`` (built in a temporary sibling, renamed into place), its
    hyper-synthesis at ``profile``'s bit widths (:data:`hyperprior_ptq.PROFILES`)."""
    say = log or (lambda _msg: None)
    bits = hyperprior_ptq.PROFILES[profile]
    out = Path(out_dir).resolve()
    if out.exists() and not overwrite and any(out.iterdir()):
        raise SetWriterError(f"{out} exists and is not empty (pass --force to replace it)")
    path = Path(checkpoint) if checkpoint is not None else DEMO_CHECKPOINT
    if not path.is_file():
        raise SetWriterError(f"checkpoint {path} not found")
    try:
        n, m = architecture(quality)
    except ValueError as exc:
        raise SetWriterError(str(exc)) from exc
    try:
        model, state = read_hyper_model(path, quality)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise SetWriterError(
            f"checkpoint {path}: not a ScaleHyperprior({n}, {m}) state dict (quality {quality})"
            f": {str(exc).splitlines()[0]}"
        ) from exc
    update_tables(model, state, f"checkpoint {path}", update_quantiles=update_quantiles)
    n, m = model_architecture(model)
    digest = blake3.blake3(path.read_bytes()).hexdigest()
    demo = (
        DEMO_CHECKPOINT.is_file()
        and digest == blake3.blake3(DEMO_CHECKPOINT.read_bytes()).hexdigest()
    )
    origin = {"kind": "demo" if demo else "checkpoint", "file": path.name, "blake3": digest}
    stem = "bmshj2018-hyperprior" if profile == "default" else f"bmshj2018-hyperprior-{profile}"
    name = name or (f"{stem}-demo-q{quality}" if demo else f"{stem}-q{quality}")

    # The entropy stage's tables.
    eb, gc = model.entropy_bottleneck, model.gaussian_conditional
    z_tables = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb._get_medians().detach().reshape(-1)
    )
    y_tables = EntropyTables.from_compressai(
        gc._quantized_cdf, gc._cdf_length, gc._offset, np.zeros(gc._offset.numel())
    )
    scale_index = {
        "format": "wai-scale-index/1",
        "scale_frac": hyperprior_ptq.SCALE_FRAC,
        "thresholds": hyperprior_ptq.scale_thresholds(gc.scale_table.tolist()),
    }
    scale_index_bytes = json_bytes(scale_index)
    thresholds = read_thresholds(scale_index_bytes, y_tables.channels)

    # The hyper-synthesis, quantised after training.
    offsets, lengths = z_tables.offsets.astype(np.int64), z_tables.cdf_lengths.astype(np.int64)
    z_range = (int(offsets.min()), int((offsets + lengths - 3).max()))
    analysis = HyperAnalysis(model)
    weights = hs_weights(model)
    say(f"hyperprior: {origin['file']} loaded; calibrating the hyper-synthesis (exact arithmetic)")
    stats, ys = calibrate(analysis, weights, z_range)
    builder, chosen = hyperprior_ptq.quantise(weights, stats, analysis.z_medians, z_range, bits)
    program_json = builder.program_json("x3", m)
    program_weights = builder.weights()
    try:
        program = load_program(program_json, program_weights)
    except WaiOpsError as exc:
        raise SetWriterError(f"the hyper-synthesis program does not load: {exc}") from exc
    say(f"hyper-synthesis: {program.operation_count} operations; bound rule holds")

    # The main synthesis, bit-identical to g_s, and its programs.
    plain = plain_synthesis(model)
    check_plain_synthesis(model, plain, _check_latents(ys))
    blob, manifest = weights_blob(plain)
    onnx_bytes = export_onnx(plain, manifest, blob, m)
    stage = HyperStage(z_tables, y_tables, thresholds, program, choose.Engines(program, "h_s"))
    picture, source = payload_picture(seed)
    payload = encode_with(analysis, stage, picture)
    result = stage.run(payload, limits=Limits())
    latent = result.latent
    graph = check_float_programs(plain, manifest, blob, onnx_bytes, [latent])
    say("decoder.onnx and the WebNN form: match torch on the payload's latent")
    files, programs = float_programs(plain, m, onnx_bytes, blob, manifest, graph, coreml, say)
    files.update(
        {
            f"cdfs_z_q{quality}.json": z_tables.to_json(),
            f"gaussian_q{quality}.json": y_tables.to_json(),
            "scale_index.json": scale_index_bytes,
            PROGRAM_FILE: program_json,
            WEIGHTS_FILE: program_weights,
            "wai-usage.json": json_bytes(
                usage(
                    origin,
                    model="hyperprior",
                    capability=CAPABILITY,
                    name=name,
                    quality=quality,
                    licence=licence,
                )
            ),
            "payload.bin": payload,
            "payload.json": json_bytes(
                {
                    "symbols_digest": result.symbols_digest,
                    "latent_shape": list(latent.shape),
                    "side_latent_shape": list(waih.read_header(payload).z.shape),
                    "picture_shape": [1, 3, PICTURE_SIZE, PICTURE_SIZE],
                    "seed": seed,
                    "source": source,
                }
            ),
        }
    )
    facts = {
        "quality": quality,
        "N": n,
        "M": m,
        "latent_channels": m,
        "upsampling": UPSAMPLING,
        "payload": "payload.bin",
        "payload_info": "payload.json",
        "weights_origin": origin["kind"],
        **TABLES_UPDATE_FACT[update_quantiles],
        "hyperprior": {
            "z_tables": f"cdfs_z_q{quality}.json",
            "y_tables": f"gaussian_q{quality}.json",
            "scale_index": "scale_index.json",
            "program": PROGRAM_FILE,
            "weights": WEIGHTS_FILE,
            "operations": program.operation_count,
            "quantisation": {
                "activation_max": bits.act,
                "scale_fraction_bits": hyperprior_ptq.SCALE_FRAC,
                "weight_dtype": "int16",
                "calibration": {
                    "pictures": "tools/train_bmshj2018.py TRAIN_IMAGES",
                    "crops_per_picture": CALIBRATION_CROPS,
                    "crop": CALIBRATION_CROP,
                    "seed": CALIBRATION_SEED,
                },
                "layers": chosen,
            }
            | ({} if profile == "default" else {"profile": {profile: vars(bits)}}),
        },
        "programs": programs,
    }
    manifest_doc = write_set_folder(
        out,
        files,
        name=name,
        capability=CAPABILITY,
        version=SET_VERSION,
        facts=facts,
        overwrite=overwrite,
    )
    say(f"set {name}: {manifest_doc.digest} in {out}")
    return out


def run(args: argparse.Namespace) -> Path:
    """Write the set the parsed options ask for; :class:`SetWriterError` when it is refused."""
    return write_from(write_set, vars(args))


def main(argv: Sequence[str] | None = None) -> int:
    return writer_main(argv, build_parser(), run, SetWriterError)


if __name__ == "__main__":
    raise SystemExit(main())
