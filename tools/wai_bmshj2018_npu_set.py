"""Write a ``wai.neural.bmshj2018`` parameter set (spec §6.1) from a CompressAI bmshj2018-factorized
model: the plain synthesis for ONNX Runtime, its WebNN form (§6.2), the Core ML program, the
entropy tables, the usage statement and one payload (docs/bmshj2018-set.md). Without
``--checkpoint`` or ``--pretrained`` the weights are the bundled demo checkpoint. Exit status 2
when the set is refused; the output directory is then left as it was.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.tools import coreml_program, webnn_form
from wai_dispatch.tools.bmshj2018_model import (
    TABLES_UPDATE_FACT,
    PlainSynthesis,
    SetWriterError,
    load_model,
    model_architecture,
    plain_synthesis,
)
from wai_dispatch.tools.bmshj2018_onnx import (
    TOLERANCE,
    export_onnx,
    json_bytes,
    max_abs,
    onnx_session,
    weights_blob,
)
from wai_dispatch.tools.bmshj2018_symbols import (
    PICTURE_SIZE,
    check_latents,
    check_plain_synthesis,
    encode_symbols,
    exact_symbols,
    payload_picture,
)
from wai_dispatch.tools.set_folder import write_from, write_set_folder, writer_main
from wai_dispatch.tools.set_writer_options import DEFAULT_SEED, DEMO_QUALITY
from wai_dispatch.tools.set_writer_options import bmshj2018_parser as build_parser
from wai_dispatch.tools.webnn_text import to_text

CAPABILITY = "wai.neural.bmshj2018"
SET_VERSION = "1"
UPSAMPLING = 16


def usage(
    origin: dict[str, Any],
    *,
    model: str,
    capability: str,
    name: str,
    quality: int,
    licence: str | None,
) -> dict[str, Any]:
    """A set's ``wai-usage.json``: ``model`` (``factorized``, ``hyperprior``) as CompressAI
    implements it, with weights of ``origin`` (CompressAI's, the demo's or a checkpoint's)."""
    attribution = (
        f"bmshj2018-{model} (J. Ballé, D. Minnen, S. Singh, S. J. Hwang, N. Johnston, "
        "'Variational image compression with a scale hyperprior', ICLR 2018) as implemented by "
        "CompressAI, Copyright (c) 2021-2024 InterDigital Communications, Inc., BSD-3-Clause-Clear"
    )
    if origin["kind"] == "pretrained":
        weights = {
            "origin": f"CompressAI's pretrained bmshj2018-{model} weights (MSE)",
            "source": origin["source"],
            "licence": licence or "BSD-3-Clause-Clear",
        }
        attribution = "Weights and model: " + attribution
    else:
        demo = origin["kind"] == "demo"
        trainer = "train_bmshj2018" if model == "factorized" else f"train_bmshj2018_{model}"
        weights = {
            "origin": f"wai-dispatch demo weights, trained by tools/{trainer}.py"
            if demo
            else f"a CompressAI bmshj2018-{model} checkpoint",
            "checkpoint": origin["file"],
            "blake3": origin["blake3"],
            "licence": licence or ("Apache-2.0" if demo else "NOASSERTION"),
        }
        publisher = (
            "the wai-dispatch authors" if demo else "as stated by the checkpoint's publisher"
        )
        attribution = f"Weights: {publisher}. Model: {attribution}"
    coded = "its tables and hyper-synthesis" if model == "hyperprior" else "its tables"
    return {
        "format": "wai-usage/1",
        "set": name,
        "capability": capability,
        "quality": quality,
        "weights": weights,
        "attribution": attribution,
        "usage": (
            f"The networks of this set decode {capability} payloads coded against {coded}; they "
            "may be used, copied and redistributed under the weights' licence, with this "
            "statement kept beside them."
        ),
    }


def check_float_programs(
    plain: PlainSynthesis,
    manifest: dict[str, Any],
    blob: bytes,
    onnx_bytes: bytes,
    latents: Sequence[np.ndarray],
) -> dict[str, Any]:
    """``decoder.onnx`` in ONNX Runtime and the WebNN form in NumPy, each held to torch on
    ``latents`` (:class:`SetWriterError` where one differs); the WebNN graph."""
    session = onnx_session(onnx_bytes, blob)
    graph = webnn_form.synthesis_graph(plain.layers(), manifest)
    consts = webnn_form.load_weights(graph, manifest, blob)
    for latent in latents:
        latent = np.ascontiguousarray(latent)
        with torch.no_grad():
            reference = plain(torch.from_numpy(latent)).numpy()
        for what, got in (
            ("decoder.onnx", session.run(["x_hat"], {"latent": latent})[0]),
            ("the WebNN form", webnn_form.evaluate(graph, consts, {"latent": latent})["x_hat"]),
        ):
            if got.shape != reference.shape or max_abs(got, reference) > TOLERANCE:
                raise SetWriterError(f"{what} differs from torch on a latent {latent.shape}")
    return graph


def float_programs(
    plain: PlainSynthesis,
    m: int,
    onnx_bytes: bytes,
    blob: bytes,
    manifest: dict[str, Any],
    graph: dict[str, Any],
    coreml: bool,
    say: Callable[[str], None],
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The float synthesis's program files and their ``programs`` facts: ``decoder.onnx``, the
    WebNN form and, with ``coreml``, the Core ML program (float16, its input fixed at the latent
    of a PICTURE_SIZE picture)."""
    files = {
        "decoder.onnx": onnx_bytes,
        "decoder.weights": blob,
        "decoder.manifest.json": json_bytes(manifest),
        "decoder.webnn": to_text(graph).encode(),
        "decoder.webnn.json": webnn_form.to_json(graph),
    }
    programs: dict[str, Any] = {
        "onnx-runtime": {
            "file": "decoder.onnx",
            "weights": "decoder.weights",
            "input": "latent",
            "output": "x_hat",
        },
        "webnn": {
            "file": "decoder.webnn.json",
            "text": "decoder.webnn",
            "weights": "decoder.weights",
            "manifest": "decoder.manifest.json",
        },
    }
    if coreml:
        shape = [1, m, PICTURE_SIZE // UPSAMPLING, PICTURE_SIZE // UPSAMPLING]
        try:
            mlmodel, weight_bin, operations = coreml_program.program_files(plain, shape)
        except coreml_program.CoreMLProgramError as exc:
            raise SetWriterError(str(exc)) from exc
        say(f"decoder.mlmodel: {operations} operations, byte-stable over two conversions")
        files["decoder.mlmodel"], files["decoder.weight.bin"] = mlmodel, weight_bin
        programs["model-runtime"] = {
            "file": "decoder.mlmodel",
            "weights": "decoder.weight.bin",
            "input": "latent",
            "output": "x_hat",
            "latent_shape": shape,
            "operations": operations,
            "precision": "float16",
            "input_dtype": "float32",
            "output_dtype": "float16",
        }
    return files, programs


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
) -> Path:
    """Write the set into ``out_dir`` (built in a temporary sibling, renamed into place at the
    end: a refusal or failure leaves ``out_dir`` as it was).  ``coreml=False`` leaves out the
    Core ML program (a set for the other paths, written faster)."""

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

    # The shared weights and decoder.onnx in ONNX Runtime, the WebNN form in NumPy: as torch.
    blob, manifest = weights_blob(plain)
    onnx_bytes = export_onnx(plain, manifest, blob, m)
    graph = check_float_programs(
        plain, manifest, blob, onnx_bytes, (latent, latent[:, :, 3:6, 2:7])
    )
    import onnx

    onnx_ops = [node.op_type for node in onnx.load_from_string(onnx_bytes).graph.node]
    nodes = len(graph["nodes"])
    say(f"decoder.onnx: {len(onnx_ops)} nodes, the WebNN form {nodes}: both match torch")

    files, programs = float_programs(plain, m, onnx_bytes, blob, manifest, graph, coreml, say)
    programs["onnx-runtime"]["operations"] = len(onnx_ops)
    files |= {
        f"cdfs_q{quality}.json": tables.to_json(),
        "wai-usage.json": json_bytes(
            usage(
                origin,
                model="factorized",
                capability=CAPABILITY,
                name=name,
                quality=quality,
                licence=licence,
            )
        ),
        "payload.bin": payload_bytes,
        "payload.json": json_bytes(
            {
                "symbols_digest": codec_payload.symbols_digest(symbols),
                "latent_shape": list(symbols.shape),
                "picture_shape": [1, 3, PICTURE_SIZE, PICTURE_SIZE],
                "seed": seed,
                "source": source,
            }
        ),
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
