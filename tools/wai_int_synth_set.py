"""``python -m wai_dispatch.tools.wai_int_synth_set``: derive a ``wai.neural.int_synth`` set
(docs/int-synth-set.md) from a float bmshj2018 set by post-training quantisation calibrated on
the demo weights' training photographs. The float set's tables and payload are kept byte for
byte; the checkpoint gives the analysis and must hold the very synthesis the float set holds."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec.sets import Manifest
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.settings import load
from wai_dispatch.tools import int_synth_ptq
from wai_dispatch.tools.bmshj2018_model import SetWriterError, load_model, plain_synthesis
from wai_dispatch.tools.bmshj2018_onnx import json_bytes, weights_blob
from wai_dispatch.tools.bmshj2018_symbols import crops as bmshj2018_crops
from wai_dispatch.tools.int_synth_exact import ExactAnalysis, ExactSynthesis
from wai_dispatch.tools.set_folder import write_from, write_set_folder, writer_main
from wai_dispatch.tools.set_writer_options import int_synth_parser as build_parser
from wai_dispatch.tools.train_bmshj2018 import TRAIN_IMAGES

CAPABILITY = "wai.neural.int_synth"
SET_VERSION = "1"
PROGRAM_FILE = "synthesis.wai-ops.json"
WEIGHTS_FILE = "synthesis.safetensors"
CALIBRATION_CROP = 256
CALIBRATION_CROPS = 4  # per training picture
CALIBRATION_SEED = 8


def float_weights(set_dir: Path) -> dict[str, np.ndarray]:
    """The float32 synthesis tensors of a bmshj2018 set (``decoder.weights`` by its manifest)."""
    manifest = json.loads((set_dir / "decoder.manifest.json").read_bytes())
    blob = (set_dir / "decoder.weights").read_bytes()
    out: dict[str, np.ndarray] = {}
    for name, t in manifest["tensors"].items():
        if t["dataType"] != "float32":
            raise SetWriterError(f"{name}: {t['dataType']}, not float32")
        raw = blob[t["byteOffset"] : t["byteOffset"] + t["byteLength"]]
        out[name] = np.frombuffer(raw, dtype="<f4").reshape(t["shape"]).copy()
    return out


def calibrate(
    model: Any,
    weights: dict[str, np.ndarray],
    log: Callable[[str], None],
    pictures: Sequence[str] | None = None,
    crops: int = CALIBRATION_CROPS,
    quantile: float | None = None,
) -> tuple[dict[str, np.ndarray], tuple[int, int]]:
    """Per-channel largest |activation| of each layer over crops of the training pictures, and
    the range of their symbols: the analysis and the synthesis in exact arithmetic
    (tools/int_synth_exact.py), so the statistics are the same bits on every CPU. With a
    ``quantile``, also ``y{i}_q``: per channel the largest over the crops of that quantile of
    the inverse GDN's |output| in one crop (a value of the crop's, no interpolation: exact).
    ``pictures`` and ``crops`` (the training pictures, 4 crops each, by default) are for tests."""

    rng = np.random.default_rng(CALIBRATION_SEED)
    analysis = ExactAnalysis(model)
    synth = ExactSynthesis(weights)
    medians = analysis.medians.reshape(1, -1, 1, 1)
    stats: dict[str, np.ndarray] = {}
    lo, hi = 0, 0
    count = 0
    names = TRAIN_IMAGES if pictures is None else pictures
    for crop in bmshj2018_crops(rng, crops, CALIBRATION_CROP, names):
        symbols = analysis.symbols(crop)
        lo, hi = min(lo, int(symbols.min())), max(hi, int(symbols.max()))
        acts = synth(symbols.astype(np.float64) + medians)  # exact: float32 medians
        for key, a in acts.items():
            mx = np.abs(a).max(axis=(0, 2, 3))
            stats[key] = mx if key not in stats else np.maximum(stats[key], mx)
            if quantile is not None and key.startswith("y"):
                flat = np.abs(a[0]).reshape(a.shape[1], -1)
                qv = np.quantile(flat, quantile, axis=1, method="higher")
                k = f"{key}_q"
                stats[k] = qv if k not in stats else np.maximum(stats[k], qv)
        count += 1
    log(f"calibration: {count} crops of {len(names)} training pictures, symbols {lo}…{hi}")
    return stats, (lo, hi)


def symbol_range(tables_json: bytes) -> tuple[int, int]:
    """The program's declared input range: the hull of the tables' supports (every symbol the
    rANS stream codes without an escape)."""
    doc = json.loads(tables_json)
    offsets = np.array(doc["offsets"], dtype=np.int64)
    lengths = np.array(doc["cdf_lengths"], dtype=np.int64)
    return int(offsets.min()), int((offsets + lengths - 2).max())


def write_set(
    out_dir: str | os.PathLike[str],
    *,
    from_set: str | os.PathLike[str],
    checkpoint: str | os.PathLike[str] | None = None,
    name: str | None = None,
    overwrite: bool = False,
    profile: str = "default",
    log: Callable[[str], None] | None = None,
) -> Path:
    """Write the integer set into ``out_dir`` from the float set folder ``from_set``, quantised
    at ``profile``'s bit widths (:data:`int_synth_ptq.PROFILES`)."""

    say = log or (lambda _msg: None)
    src = Path(from_set)
    out = Path(out_dir).resolve()
    if out.exists() and not overwrite and any(out.iterdir()):
        raise SetWriterError(f"{out} exists and is not empty (pass --force to replace it)")
    float_manifest = Manifest.from_bytes((src / "set.json").read_bytes())
    if float_manifest.capability != "wai.neural.bmshj2018":
        raise SetWriterError(f"{src}: a {float_manifest.capability} set, not wai.neural.bmshj2018")
    facts = float_manifest.facts.to_json()
    weights = float_weights(src)
    model, origin = load_model(checkpoint=checkpoint, pretrained=False, quality=facts["quality"])
    blob, _ = weights_blob(plain_synthesis(model))
    if blob != (src / "decoder.weights").read_bytes():
        raise SetWriterError("the checkpoint's synthesis is not the float set's (decoder.weights)")
    tables_name = facts["tables"]
    tables = (src / tables_name).read_bytes()
    bits = int_synth_ptq.PROFILES[profile]
    stats, seen = calibrate(model, weights, say, quantile=bits.clip)
    lo, hi = symbol_range(tables)
    medians = np.array(json.loads(tables)["medians"], dtype=np.float32)
    builder, chosen = int_synth_ptq.quantise(weights, stats, medians, (lo, hi), bits)
    program_json = builder.program_json("x4", 3)
    weights_bytes = builder.weights()
    program = load_program(program_json, weights_bytes, rgb8_output=True)
    say(f"program: {program.operation_count} operations; bound rule holds")
    stem = "int-synth" if profile == "default" else f"int-synth-{profile}"
    name = name or (f"{stem}-demo-q3" if origin["kind"] == "demo" else stem)
    usage = json.loads((src / "wai-usage.json").read_bytes())
    usage.update(
        set=name,
        capability=CAPABILITY,
        derived_from={"set": float_manifest.digest, "name": float_manifest.name},
    )
    files = {
        PROGRAM_FILE: program_json,
        WEIGHTS_FILE: weights_bytes,
        tables_name: tables,
        "payload.bin": (src / facts["payload"]).read_bytes(),
        "payload.json": (src / facts["payload_info"]).read_bytes(),
        "wai-usage.json": json_bytes(usage),
    }
    new_facts = {
        "quality": facts["quality"],
        "N": facts["N"],
        "M": facts["M"],
        "latent_channels": facts["latent_channels"],
        "upsampling": facts["upsampling"],
        "tables": tables_name,
        "payload": "payload.bin",
        "payload_info": "payload.json",
        "weights_origin": facts.get("weights_origin", origin["kind"]),
        "derived_from": float_manifest.digest,
        "quantisation": {
            "activation_bits": bits.act.bit_length() + 1,
            "weight_dtype": "int16",
            "latent_fraction_bits": bits.latent_frac,
            "square_shift": int_synth_ptq.SQUARE_SHIFT,
            "calibration": {
                "pictures": "tools/train_bmshj2018.py TRAIN_IMAGES",
                "crops_per_picture": CALIBRATION_CROPS,
                "crop": CALIBRATION_CROP,
                "seed": CALIBRATION_SEED,
                "symbols_seen": list(seen),
            },
            "layers": chosen,
        }
        | ({} if profile == "default" else {"profile": {profile: vars(bits)}}),
        "programs": {
            "wai-ops": {
                "file": PROGRAM_FILE,
                "weights": WEIGHTS_FILE,
                "format": "wai-ops/1",
                "input": "symbols",
                "output": "x4",
                "output_format": "rgb8",
                "operations": program.operation_count,
            }
        },
    }
    manifest = write_set_folder(
        out,
        files,
        name=name,
        capability=CAPABILITY,
        version=SET_VERSION,
        facts=new_facts,
        overwrite=True,
    )
    say(f"set {name}: {manifest.digest} in {out}")
    return out


def _set_folder(text: str, data_dir: Path | None) -> Path:
    """A set folder as given, else the folder of the installed set with that digest."""
    if Path(text).is_dir():
        return Path(text)

    # the bundled sets installed, as every command
    store = Decoder.assemble(**load(data_dir=data_dir).decoder_args()).set_store
    return store.get(store.resolve(text)).path


def run(args: argparse.Namespace) -> Path:
    """Write the set the parsed options ask for; :class:`SetWriterError` when it is refused."""
    options = {k: v for k, v in vars(args).items() if k != "data_dir"}
    return write_from(write_set, options | {"from_set": _set_folder(args.from_set, args.data_dir)})


def main(argv: Sequence[str] | None = None) -> int:
    return writer_main(argv, build_parser(), run, SetWriterError)


if __name__ == "__main__":
    raise SystemExit(main())
