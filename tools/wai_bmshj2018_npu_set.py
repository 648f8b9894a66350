"""Write a ``wai.neural.bmshj2018`` parameter set (spec §6.1) from a CompressAI bmshj2018-factorized
model: the plain synthesis for ONNX Runtime, its WebNN form (§6.2), the Core ML program, the
entropy tables, the usage statement and one payload.  docs/bmshj2018-set.md describes each file.

Run: ``python -m wai_dispatch.tools.wai_bmshj2018_npu_set --out DIR [--quality 3] [--seed 20261109]
[--checkpoint FILE | --pretrained] [--licence SPDX] [--force]``.  Without ``--checkpoint`` or
``--pretrained`` the weights are the bundled demo checkpoint.  Exit status 2 when the set is
refused (a plain synthesis that is not bit-identical to CompressAI's ``g_s``, a check that does
not hold, bad arguments); the output directory is then left as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.paths.onnx import shared_session_options
from wai_dispatch.tools import coreml_program, webnn_form
from wai_dispatch.tools.bmshj2018_model import (
    DEMO_CHECKPOINT,
    TABLES_UPDATE_FACT,
    PlainInverseGDN,
    PlainSynthesis,
    SetWriterError,
    SynthesisMismatch,
    load_model,
    model_architecture,
    plain_synthesis,
)
from wai_dispatch.tools.int_synth_exact import ExactAnalysis
from wai_dispatch.tools.set_folder import write_set_folder
from wai_dispatch.tools.set_writer_options import DEFAULT_SEED, DEMO_QUALITY
from wai_dispatch.tools.set_writer_options import bmshj2018_parser as build_parser
from wai_dispatch.tools.train_bmshj2018 import HELD_OUT_IMAGES, load_image

__all__ = [
    "CAPABILITY",
    "DEFAULT_SEED",
    "DEMO_CHECKPOINT",
    "PlainInverseGDN",
    "PlainSynthesis",
    "SetWriterError",
    "SynthesisMismatch",
    "build_parser",
    "load_model",
    "main",
    "payload_picture",
    "plain_synthesis",
    "run",
    "write_set",
]

CAPABILITY = "wai.neural.bmshj2018"
SET_VERSION = "1"
UPSAMPLING = 16
PICTURE_SIZE = 256  # the payload's picture, and the Core ML program's fixed input (its latent)
CHECK_IMAGES = ("astronaut", "chelsea", "coffee")
CHECK_SEED = 1802  # the random check latents: fixed, independent of the payload's seed
ONNX_OPSET = 17
ONNX_OPS = frozenset({"ConvTranspose", "Conv", "Mul", "Sqrt"})
WEIGHTS_ALIGNMENT = 64
TOLERANCE = 1e-3  # max abs, float32 runtimes against torch on pictures in [0, 1]

COMPRESSAI_ATTRIBUTION = (
    "bmshj2018-factorized (J. Ballé, D. Minnen, S. Singh, S. J. Hwang, N. Johnston, 'Variational "
    "image compression with a scale hyperprior', ICLR 2018) as implemented by CompressAI, "
    "Copyright (c) 2021-2024 InterDigital Communications, Inc., BSD-3-Clause-Clear"
)


def _held_out_images() -> tuple[str, ...]:
    return tuple(HELD_OUT_IMAGES)


def _load_image(name: str) -> npt.NDArray[np.uint8]:
    return np.ascontiguousarray(load_image(name))


def payload_picture(seed: int) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
    """The payload's picture: a 256x256 crop of one of the pictures the demo weights were not
    trained on, image and offset drawn by ``numpy.random.default_rng(seed)``."""
    images = _held_out_images()
    rng = np.random.default_rng(seed)
    name = images[int(rng.integers(len(images)))]
    image = _load_image(name)
    top = int(rng.integers(0, image.shape[0] - PICTURE_SIZE + 1))
    left = int(rng.integers(0, image.shape[1] - PICTURE_SIZE + 1))
    crop = image[top : top + PICTURE_SIZE, left : left + PICTURE_SIZE]
    source = {
        "image": f"skimage.data.{name}",
        "top": top,
        "left": left,
        "height": PICTURE_SIZE,
        "width": PICTURE_SIZE,
        "draw": "numpy.random.default_rng(seed): image index, then top, then left",
    }
    return np.ascontiguousarray(crop), source


def _to_tensor(picture: npt.NDArray[np.uint8]) -> Any:

    return torch.from_numpy(picture).permute(2, 0, 1)[None].float().div(255.0)


def encode_symbols(model: Any, picture: npt.NDArray[np.uint8]) -> tuple[Any, float]:
    """The symbols of ``g_a(picture)``, as CompressAI's ``EntropyBottleneck.compress`` computes
    them (``round(y - median)``, int32), and the smallest distance of ``y - median`` from a
    rounding boundary (how far the encoder's float arithmetic is from flipping a symbol)."""

    eb = model.entropy_bottleneck
    with torch.no_grad():
        y = model.g_a(_to_tensor(picture))
        medians = eb._get_medians().detach()
        medians = eb._extend_ndims(medians, 2).expand(y.size(0), *([-1] * 3))
        symbols = eb.quantize(y, "symbols", medians)
        # Cross-check against CompressAI's own coder: the latent it decodes is symbol + median.
        strings = eb.compress(y)
        decoded = eb.decompress(strings, y.shape[2:])
    if not torch.equal(decoded, symbols.float() + medians):
        raise SetWriterError("CompressAI's compress/decompress disagrees with round(y - median)")
    frac = (y - medians).double()
    margin = float((frac - torch.floor(frac) - 0.5).abs().min())
    return symbols.to(torch.int32), margin


def exact_symbols(model: Any, picture: npt.NDArray[np.uint8]) -> tuple[Any, float]:
    """The payload's symbols ``round(y − median)`` with ``y = g_a(picture)`` computed in exact
    arithmetic (tools/int_synth_exact.py: the same bits on every CPU), int32, and the smallest
    distance of ``y − median`` from a rounding boundary."""

    analysis = ExactAnalysis(model)
    frac = analysis.latent(picture) - analysis.medians[None, :, None, None]
    margin = float(np.abs(frac - np.floor(frac) - 0.5).min())
    return np.rint(frac).astype(np.int32), margin


def check_latents(model: Any, seed: int = CHECK_SEED) -> Iterator[Any]:
    """Latents with real spread: CompressAI's quantized latents (symbol + median) of crops of
    natural pictures, then integer symbols drawn per channel with those latents' spread (and a
    heavier tail), on a square and a non-square shape.  Yielded one by one, so a refusal comes
    at the first latent that differs."""
    eb = model.entropy_bottleneck
    medians = eb._get_medians().detach().reshape(1, -1, 1, 1)
    symbols = []
    for name in CHECK_IMAGES:
        image = _load_image(name)
        top, left = (image.shape[0] - PICTURE_SIZE) // 2, (image.shape[1] - PICTURE_SIZE) // 2
        s, _ = encode_symbols(model, image[top : top + PICTURE_SIZE, left : left + PICTURE_SIZE])
        symbols.append(s)
        yield s.float() + medians
    spread = torch.cat(symbols, dim=0).float().std(dim=(0, 2, 3)).numpy()
    rng = np.random.default_rng(seed)
    for shape, scale in (((16, 16), 1.0), ((12, 20), 3.0)):
        draw = rng.normal(size=(1, spread.size, *shape)) * (scale * spread + 0.5)[:, None, None]
        s = torch.from_numpy(np.rint(draw).astype(np.int32))
        yield s.float() + medians


def check_plain_synthesis(model: Any, plain: Any, latents: Iterable[Any]) -> None:
    """Refuse (§6.1) a plain synthesis that differs from ``g_s`` by any amount on any latent."""
    with torch.no_grad():
        for i, latent in enumerate(latents):
            ref, out = model.g_s(latent), plain(latent)
            if not torch.equal(ref, out):
                diff = (ref - out).abs()
                raise SynthesisMismatch(
                    f"the plain synthesis differs from CompressAI's g_s on check latent {i} "
                    f"(shape {tuple(latent.shape)}): {int((diff > 0).sum())} of {diff.numel()} "
                    f"values, max abs {float(diff.max()):.3g}; the set is not written"
                )


# -- the shared weights, ONNX --------------------------------------------------------------------


def weights_blob(plain: Any) -> tuple[bytes, dict[str, Any]]:
    """``decoder.weights`` (float32 LE tensors, headerless, 64-byte aligned offsets from 0) and
    its ``wg-weights-manifest`` version 1."""
    blob = bytearray()
    tensors: dict[str, Any] = {}
    for ref, value in plain.state_dict().items():
        data = value.detach().cpu().numpy().astype("<f4", copy=False).tobytes()
        blob.extend(b"\0" * (-len(blob) % WEIGHTS_ALIGNMENT))
        tensors[ref] = {
            "dataType": "float32",
            "shape": list(value.shape),
            "byteOffset": len(blob),
            "byteLength": len(data),
            "layout": "row-major",
        }
        blob.extend(data)
    manifest = {
        "format": "wg-weights-manifest",
        "version": 1,
        "endianness": "little",
        "tensors": tensors,
    }
    return bytes(blob), manifest


def _json_bytes(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode()


def export_onnx(plain: Any, manifest: dict[str, Any], blob: bytes, channels: int) -> bytes:
    """``decoder.onnx``: the plain synthesis (opset 17, dynamic latent height and width), its
    initializers stored as external data in ``decoder.weights`` at the manifest's offsets."""

    import onnx
    from onnx import numpy_helper

    example = torch.zeros(1, channels, 4, 4)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        exported = Path(tmp) / "decoder.onnx"  # torch.onnx.export's ``f`` is a path
        torch.onnx.export(
            plain,
            (example,),
            exported,
            input_names=["latent"],
            output_names=["x_hat"],
            opset_version=ONNX_OPSET,
            dynamic_axes={
                "latent": {2: "latent_height", 3: "latent_width"},
                "x_hat": {2: "picture_height", 3: "picture_width"},
            },
            do_constant_folding=True,
            dynamo=False,
        )
        model = onnx.load_from_string(exported.read_bytes())
    unmerge_initializers(model, set(manifest["tensors"]))
    names = {init.name for init in model.graph.initializer}
    if names != set(manifest["tensors"]):
        raise SetWriterError(
            f"the ONNX export's initializers {sorted(names)} are not the synthesis's weights"
        )
    for init in model.graph.initializer:
        entry = manifest["tensors"][init.name]
        start, length = entry["byteOffset"], entry["byteLength"]
        data = numpy_helper.to_array(init).astype("<f4").tobytes()
        if data != blob[start : start + length]:
            raise SetWriterError(f"ONNX initializer {init.name}: bytes differ from the weights")
        init.ClearField("raw_data")
        init.ClearField("float_data")
        init.data_location = onnx.TensorProto.EXTERNAL
        del init.external_data[:]
        for key, value in (("location", "decoder.weights"), ("offset", start), ("length", length)):
            entry_proto = init.external_data.add()
            entry_proto.key, entry_proto.value = key, str(value)
    ops = [node.op_type for node in model.graph.node]
    if not set(ops) <= ONNX_OPS:
        raise SetWriterError(f"the ONNX export holds operations {sorted(set(ops) - ONNX_OPS)}")
    return model.SerializeToString()


def unmerge_initializers(model: Any, weights: set[str]) -> int:
    """Undo the export's merging of identical initializers, in place: ``torch.onnx.export``
    keeps one copy of tensors with identical values (the three inverse GDNs of a freshly
    initialised model hold identical β and γ) and names the others through ``Identity``
    nodes.  Each such node whose input is an initializer and whose output is one of the
    synthesis's ``weights`` becomes an initializer of that name again (the same values), so
    every weight is its own tensor in ``decoder.weights``.  Returns how many were restored."""

    initializers = {init.name: init for init in model.graph.initializer}
    kept = []
    restored = 0
    for node in model.graph.node:
        source = node.input[0] if node.op_type == "Identity" and len(node.input) == 1 else None
        target = node.output[0] if len(node.output) == 1 else None
        if source in initializers and target in weights and target not in initializers:
            copy = model.graph.initializer.add()
            copy.CopyFrom(initializers[source])
            copy.name = target
            initializers[target] = copy
            restored += 1
        else:
            kept.append(node)
    if restored:
        del model.graph.node[:]
        model.graph.node.extend(kept)
    return restored


def onnx_session(onnx_bytes: bytes, blob: bytes) -> Any:
    """An ONNX Runtime session over the in-memory ``decoder.onnx`` and ``decoder.weights``,
    on the process-wide thread pool the ONNX Runtime path uses (a session with its own pool is
    refused once that pool exists)."""
    import onnxruntime as ort

    options = shared_session_options()
    options.log_severity_level = 3
    options.add_external_initializers_from_files_in_memory(
        ["decoder.weights"], [np.frombuffer(blob, dtype=np.uint8)], [len(blob)]
    )
    return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])


def _max_abs(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


# -- the set -------------------------------------------------------------------------------------


def _usage(
    origin: dict[str, Any], *, name: str, quality: int, licence: str | None
) -> dict[str, Any]:
    if origin["kind"] == "pretrained":
        weights = {
            "origin": "CompressAI's pretrained bmshj2018-factorized weights (MSE)",
            "source": origin["source"],
            "licence": licence or "BSD-3-Clause-Clear",
        }
        attribution = "Weights and model: " + COMPRESSAI_ATTRIBUTION
    else:
        demo = origin["kind"] == "demo"
        weights = {
            "origin": "wai-dispatch demo weights, trained by tools/train_bmshj2018.py"
            if demo
            else "a CompressAI bmshj2018-factorized checkpoint",
            "checkpoint": origin["file"],
            "blake3": origin["blake3"],
            "licence": licence or ("Apache-2.0" if demo else "NOASSERTION"),
        }
        attribution = (
            (
                "Weights: the wai-dispatch authors"
                if demo
                else "Weights: as stated by the checkpoint's publisher"
            )
            + ". Model: "
            + COMPRESSAI_ATTRIBUTION
        )
    return {
        "format": "wai-usage/1",
        "set": name,
        "capability": CAPABILITY,
        "quality": quality,
        "weights": weights,
        "attribution": attribution,
        "usage": (
            "The networks of this set decode wai.neural.bmshj2018 payloads coded against its "
            "tables; they may be used, copied and redistributed under the weights' licence, "
            "with this statement kept beside them."
        ),
    }


def write_set(
    out_dir: str | os.PathLike[str],
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    pretrained: bool = False,
    quality: int = DEMO_QUALITY,
    seed: int = DEFAULT_SEED,
    licence: str | None = None,
    name: str | None = None,
    overwrite: bool = False,
    update_quantiles: bool = False,
    log: Callable[[str], None] | None = None,
    coreml: bool = True,
    _perturb: Callable[[Any], None] | None = None,
) -> Path:
    """Write the set into ``out_dir`` (built in a temporary sibling, renamed into place at the
    end: a refusal or failure leaves ``out_dir`` as it was).  ``coreml=False`` leaves out the
    Core ML program (a set for the other paths, written faster).  ``_perturb``, for tests only,
    is applied to the plain synthesis before the bit-identity check."""

    say = log or (lambda _msg: None)
    out = Path(out_dir).resolve()
    if out.exists() and not overwrite and any(out.iterdir()):
        raise SetWriterError(f"{out} exists and is not empty (pass --force to replace it)")
    model, origin = load_model(
        checkpoint=checkpoint,
        pretrained=pretrained,
        quality=quality,
        update_quantiles=update_quantiles,
    )
    n, m = model_architecture(model)
    if name is None:
        name = f"bmshj2018-demo-q{quality}" if origin["kind"] == "demo" else f"bmshj2018-q{quality}"

    say(f"bmshj2018: weights loaded ({origin['kind']}); checking the plain synthesis")
    # The plain synthesis, bit-identical to g_s or refused (§6.1).
    plain = plain_synthesis(model)
    if _perturb is not None:
        with torch.no_grad():
            _perturb(plain)
    check_plain_synthesis(model, plain, check_latents(model))
    say("plain synthesis: bit-identical to g_s on the check latents")

    # Tables, and the payload of a picture drawn from the seed.
    eb = model.entropy_bottleneck
    tables = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb._get_medians().detach().reshape(-1)
    )
    picture, source = payload_picture(seed)
    symbols, margin = exact_symbols(model, picture)
    symbols_t = torch.from_numpy(symbols)
    theirs, _ = encode_symbols(model, picture)  # CompressAI's float32 encoder, on this CPU
    flipped = int((theirs.numpy() != symbols).sum())
    payload_bytes = codec_payload.encode(symbols, tables)
    if not np.array_equal(codec_payload.decode(payload_bytes, tables), symbols):
        raise SetWriterError("the payload does not decode to its symbols")
    latent = codec_payload.latent(symbols, tables)
    medians = eb._get_medians().detach().reshape(1, -1, 1, 1)
    if not torch.equal(torch.from_numpy(latent), symbols_t.float() + medians):
        raise SetWriterError("codec.payload.latent differs from CompressAI's dequantize")
    say(
        f"payload: {source['image']} at ({source['top']}, {source['left']}); margin {margin:.2e}"
        f"; CompressAI's float32 encoder here differs in {flipped} symbols"
    )

    with torch.no_grad():
        reference = plain(torch.from_numpy(latent)).numpy()
        small = torch.from_numpy(latent[:, :, 3:6, 2:7].copy())
        reference_small = plain(small).numpy()

    # The shared weights and decoder.onnx, checked against torch in ONNX Runtime.
    blob, manifest = weights_blob(plain)
    onnx_bytes = export_onnx(plain, manifest, blob, m)
    session = onnx_session(onnx_bytes, blob)
    for lat, ref in ((latent, reference), (small.numpy(), reference_small)):
        got = session.run(["x_hat"], {"latent": lat})[0]
        if got.shape != ref.shape or _max_abs(got, ref) > TOLERANCE:
            raise SetWriterError(f"decoder.onnx differs from torch on a latent {lat.shape}")
    import onnx

    onnx_ops = [node.op_type for node in onnx.load_from_string(onnx_bytes).graph.node]
    say(f"decoder.onnx: {len(onnx_ops)} nodes, matches torch in ONNX Runtime")

    # The WebNN form, evaluated in NumPy against torch.
    graph = webnn_form.synthesis_graph(plain.layers(), manifest)
    consts = webnn_form.load_weights(graph, manifest, blob)
    for lat, ref in ((latent, reference), (small.numpy(), reference_small)):
        got = webnn_form.evaluate(graph, consts, {"latent": lat})["x_hat"]
        if got.shape != ref.shape or _max_abs(got, ref) > TOLERANCE:
            raise SetWriterError(f"the WebNN form differs from torch on a latent {lat.shape}")
    say(f"decoder.webnn.json: {len(graph['nodes'])} nodes, matches torch in NumPy")

    files: dict[str, bytes] = {
        "decoder.onnx": onnx_bytes,
        "decoder.weights": blob,
        "decoder.manifest.json": _json_bytes(manifest),
        "decoder.webnn": webnn_form.to_text(graph).encode(),
        "decoder.webnn.json": webnn_form.to_json(graph),
        f"cdfs_q{quality}.json": tables.to_json(),
        "wai-usage.json": _json_bytes(_usage(origin, name=name, quality=quality, licence=licence)),
        "payload.bin": payload_bytes,
        "payload.json": _json_bytes(
            {
                "symbols_digest": codec_payload.symbols_digest(symbols),
                "latent_shape": list(symbols.shape),
                "picture_shape": [1, 3, PICTURE_SIZE, PICTURE_SIZE],
                "seed": seed,
                "source": source,
            }
        ),
    }
    programs: dict[str, Any] = {
        "onnx-runtime": {
            "file": "decoder.onnx",
            "weights": "decoder.weights",
            "input": "latent",
            "output": "x_hat",
            "operations": len(onnx_ops),
        },
    }
    if coreml:
        # The Core ML program, float16, input fixed at the latent of a 256 x 256 picture.
        coreml_shape = [1, m, PICTURE_SIZE // UPSAMPLING, PICTURE_SIZE // UPSAMPLING]
        try:
            mlmodel, weight_bin, operations = coreml_program.program_files(plain, coreml_shape)
        except coreml_program.CoreMLProgramError as exc:
            raise SetWriterError(str(exc)) from exc
        say(f"decoder.mlmodel: {operations} operations, byte-stable over two conversions")
        files["decoder.mlmodel"], files["decoder.weight.bin"] = mlmodel, weight_bin
        programs["model-runtime"] = {
            "file": "decoder.mlmodel",
            "weights": "decoder.weight.bin",
            "input": "latent",
            "output": "x_hat",
            "latent_shape": coreml_shape,
            "operations": operations,
            "precision": "float16",
            "input_dtype": "float32",
            "output_dtype": "float16",
        }
    programs["webnn"] = {
        "file": "decoder.webnn.json",
        "text": "decoder.webnn",
        "weights": "decoder.weights",
        "manifest": "decoder.manifest.json",
    }
    facts = {
        "quality": quality,
        "N": n,
        "M": m,
        "latent_channels": m,
        "upsampling": UPSAMPLING,
        "tables": f"cdfs_q{quality}.json",
        "payload": "payload.bin",
        "payload_info": "payload.json",
        "weights_origin": origin["kind"],
        **TABLES_UPDATE_FACT[update_quantiles],
        "programs": programs,
    }

    manifest_doc = write_set_folder(
        out, files, name=name, capability=CAPABILITY, version=SET_VERSION, facts=facts,
        overwrite=overwrite,
    )  # fmt: skip
    say(f"set {name}: {manifest_doc.digest} in {out}")
    return out


def run(args: argparse.Namespace) -> Path:
    """Write the set the parsed options ask for; :class:`SetWriterError` when it is refused."""
    return write_set(
        args.out,
        checkpoint=args.checkpoint,
        pretrained=args.pretrained,
        quality=args.quality,
        seed=args.seed,
        licence=args.licence,
        name=args.name,
        overwrite=args.force,
        update_quantiles=args.update_quantiles,
        log=lambda msg: print(msg, file=sys.stderr),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except SetWriterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
