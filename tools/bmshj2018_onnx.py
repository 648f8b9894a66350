"""The bmshj2018 synthesis as ONNX: the shared weights (``decoder.weights`` and its manifest),
``decoder.onnx`` exported from the plain synthesis with its initializers as external data in
those weights, and an ONNX Runtime session over the two in memory.  Used by every bmshj2018
set writer (``wai_bmshj2018_npu_set``, ``wai_bmshj2018_hyperprior_set``, ``wai_int_synth_set``)."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wai_dispatch.paths.onnx import shared_session_options
from wai_dispatch.tools.bmshj2018_model import SetWriterError

ONNX_OPSET = 17
ONNX_OPS = frozenset({"ConvTranspose", "Conv", "Mul", "Sqrt"})
WEIGHTS_ALIGNMENT = 64
TOLERANCE = 1e-3  # max abs, float32 runtimes against torch on pictures in [0, 1]


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


def json_bytes(doc: Any) -> bytes:
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


def max_abs(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))
