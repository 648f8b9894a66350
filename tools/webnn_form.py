"""The WebNN form of the bmshj2018 synthesis (spec §6.2): its GraphJson (webnn-graph's, version
2), its ``.webnn`` text (``tools/webnn_text.py`` writes and reads it) and a small NumPy
reference evaluator that proves the form computes the synthesis.

Conventions (docs/bmshj2018-set.md): ``conv2d``/``convTranspose2d`` take ``[input, filter,
bias]`` (webnn-graph's ``convert-onnx`` convention), filters in ``oihw``/``iohw`` (the very bytes
of ``decoder.weights``); every ``convTranspose2d`` has no padding and is followed by a ``slice``
(§6.2: one browser's backend refuses explicit padding on a transposed convolution), a size that
follows a dynamic dimension written ``{"dim": "latent_height", "mul": 4}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

FORMAT = "webnn-graph-json"
_NP_DTYPES = {"float32": "<f4", "float16": "<f2", "int32": "<i4", "uint8": "u1"}


class WebNNFormError(ValueError):
    """A GraphJson this module cannot build, write or evaluate."""


# -- building ------------------------------------------------------------------------------------


def synthesis_graph(
    layers: Sequence[Mapping[str, Any]],
    manifest: Mapping[str, Any],
    *,
    name: str = "bmshj2018_synthesis",
    input_name: str = "latent",
    output_name: str = "x_hat",
    max_latent: int = 256,
) -> dict[str, Any]:
    """The GraphJson of a synthesis: ``layers`` in order, each ``{"kind": "deconv", "weight",
    "bias", "stride", "padding", "output_padding"}`` or ``{"kind": "igdn", "gamma", "beta"}``
    (values are weight references, keys of ``manifest["tensors"]``)."""
    tensors = manifest["tensors"]
    first = tensors[layers[0]["weight"]]["shape"]
    graph: dict[str, Any] = {
        "format": FORMAT,
        "version": 2,
        "name": name,
        "quantized": False,
        "inputs": {
            input_name: {
                "dataType": "float32",
                "shape": [
                    1,
                    int(first[0]),
                    {"name": "latent_height", "maxSize": max_latent},
                    {"name": "latent_width", "maxSize": max_latent},
                ],
            }
        },
        "consts": {},
        "nodes": [],
        "outputs": {output_name: output_name},
    }
    consts, nodes = graph["consts"], graph["nodes"]

    def const(ref: str) -> str:
        ident = ref.replace(".", "_")
        entry = tensors[ref]
        consts[ident] = {
            "dataType": entry["dataType"],
            "shape": list(entry["shape"]),
            "init": {"kind": "weights", "ref": ref},
        }
        return ident

    x, scale = input_name, 1
    for i, layer in enumerate(layers, start=1):
        last = i == len(layers)
        if layer["kind"] == "deconv":
            w = const(layer["weight"])
            b = const(layer["bias"])
            stride, pad, out_pad = layer["stride"], layer["padding"], layer["output_padding"]
            kernel = tensors[layer["weight"]]["shape"][2]
            out_channels = tensors[layer["weight"]]["shape"][1]
            full = f"{w.rsplit('_', 1)[0]}_full"
            nodes.append(
                {
                    "id": full,
                    "op": "convTranspose2d",
                    "inputs": [x, w, b],
                    "options": {
                        "strides": [stride, stride],
                        "dilations": [1, 1],
                        "padding": [0, 0, 0, 0],
                        "outputPadding": [0, 0],
                    },
                    "outputs": None,
                }
            )
            # Unpadded output: (H - 1) * s + k rows; padding p and output padding op keep rows
            # p .. p + (H - 1) * s + k - 2p + op, i.e. H * s rows for k5 s2 p2 op1.
            if kernel - 2 * pad + out_pad != stride:
                raise WebNNFormError(
                    f"layer {i}: kernel {kernel}, stride {stride}, padding {pad}, output padding "
                    f"{out_pad} do not give an output of stride * input"
                )
            scale *= stride
            x = output_name if last else full.removesuffix("_full")
            nodes.append(
                {
                    "id": x,
                    "op": "slice",
                    "inputs": [full],
                    "options": {
                        "starts": [0, 0, pad, pad],
                        "sizes": [
                            1,
                            out_channels,
                            {"dim": "latent_height", "mul": scale},
                            {"dim": "latent_width", "mul": scale},
                        ],
                    },
                    "outputs": None,
                }
            )
        elif layer["kind"] == "igdn":
            gamma = const(layer["gamma"])
            beta = const(layer["beta"])
            stem = gamma.rsplit("_", 1)[0]
            ops = [
                (f"{stem}_square", "mul", [x, x], {}),
                (
                    f"{stem}_norm",
                    "conv2d",
                    [f"{stem}_square", gamma, beta],
                    {"strides": [1, 1], "dilations": [1, 1], "padding": [0, 0, 0, 0]},
                ),
                (f"{stem}_root", "sqrt", [f"{stem}_norm"], {}),
                (output_name if last else stem, "mul", [x, f"{stem}_root"], {}),
            ]
            for ident, op, inputs, options in ops:
                nodes.append(
                    {"id": ident, "op": op, "inputs": inputs, "options": options, "outputs": None}
                )
            x = ops[-1][0]
        else:
            raise WebNNFormError(f"layer {i}: unknown kind {layer['kind']!r}")
    return graph


# -- writing -------------------------------------------------------------------------------------


def to_json(graph: Mapping[str, Any]) -> bytes:
    """The GraphJson bytes as the set stores them (key order kept, two-space indent, final LF)."""
    return (json.dumps(graph, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode()


# -- the NumPy reference evaluator ---------------------------------------------------------------


def load_weights(
    graph: Mapping[str, Any], manifest: Mapping[str, Any], blob: bytes
) -> dict[str, npt.NDArray[Any]]:
    """Each const of the graph as an array, read from the ``.weights`` blob through the manifest
    (absolute ``byteOffset``/``byteLength``; the graph's dtype and shape are authoritative)."""
    out: dict[str, npt.NDArray[Any]] = {}
    for name, decl in graph["consts"].items():
        ref = decl["init"]["ref"]
        entry = manifest["tensors"].get(ref)
        if entry is None:
            raise WebNNFormError(f"const {name}: weights reference {ref!r} not in the manifest")
        start, length = int(entry["byteOffset"]), int(entry["byteLength"])
        dtype = np.dtype(_NP_DTYPES[decl["dataType"]])
        shape = tuple(int(d) for d in decl["shape"])
        if (
            start < 0
            or start + length > len(blob)
            or length != dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        ):
            raise WebNNFormError(f"const {name}: bytes {start}+{length} do not fit {shape}")
        out[name] = np.frombuffer(blob, dtype=dtype, count=length // dtype.itemsize, offset=start)
        out[name] = out[name].reshape(shape)
    return out


def _resolve(size: Any, dims: Mapping[str, int]) -> int:
    if isinstance(size, Mapping):
        return int(size.get("mul", 1)) * dims[size["dim"]]
    return int(size)


def _conv_transpose2d(
    x: npt.NDArray[np.float64], w: npt.NDArray[np.float64], stride: Sequence[int]
) -> npt.NDArray[np.float64]:
    n, _, h, wd = x.shape
    _, co, kh, kw = w.shape  # iohw
    sh, sw = stride
    out = np.zeros((n, co, (h - 1) * sh + kh, (wd - 1) * sw + kw))
    for i in range(kh):
        for j in range(kw):
            contrib = np.einsum("nchw,co->nohw", x, w[:, :, i, j], optimize=True)
            out[:, :, i : i + (h - 1) * sh + 1 : sh, j : j + (wd - 1) * sw + 1 : sw] += contrib
    return out


def _conv2d(
    x: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    stride: Sequence[int],
    padding: Sequence[int],
) -> npt.NDArray[np.float64]:
    top, bottom, left, right = padding
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, _, h, wd = x.shape
    co, _, kh, kw = w.shape  # oihw
    sh, sw = stride
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    out = np.zeros((n, co, oh, ow))
    for i in range(kh):
        for j in range(kw):
            window = x[:, :, i : i + (oh - 1) * sh + 1 : sh, j : j + (ow - 1) * sw + 1 : sw]
            out += np.einsum("nchw,oc->nohw", window, w[:, :, i, j], optimize=True)
    return out


def _check_options(node: Mapping[str, Any], allowed: Mapping[str, Any]) -> None:
    for key, value in node["options"].items():
        if key not in allowed:
            raise WebNNFormError(f"node {node['id']}: option {key!r} is not evaluated here")
        if allowed[key] is not None and value != allowed[key]:
            raise WebNNFormError(f"node {node['id']}: {key}={value!r} is not evaluated here")


def evaluate(
    graph: Mapping[str, Any],
    weights: Mapping[str, npt.NDArray[Any]],
    inputs: Mapping[str, npt.NDArray[Any]],
) -> dict[str, npt.NDArray[np.float64]]:
    """Run the graph in float64 NumPy (a reference, not a fast path); the outputs by binding."""
    values: dict[str, npt.NDArray[np.float64]] = {}
    dims: dict[str, int] = {}
    for name, desc in graph["inputs"].items():
        value = np.asarray(inputs[name], dtype=np.float64)
        if value.ndim != len(desc["shape"]):
            raise WebNNFormError(f"input {name}: rank {value.ndim}, declared {desc['shape']}")
        for actual, dim in zip(value.shape, desc["shape"], strict=True):
            if isinstance(dim, Mapping):
                if not 0 < actual <= int(dim["maxSize"]):
                    raise WebNNFormError(f"input {name}: {dim['name']}={actual} out of bounds")
                dims[dim["name"]] = actual
            elif actual != dim:
                raise WebNNFormError(f"input {name}: shape {value.shape}, declared {desc['shape']}")
        values[name] = value
    for name in graph["consts"]:
        values[name] = np.asarray(weights[name], dtype=np.float64)
    conv_options = {"strides": None, "dilations": [1, 1], "padding": None}
    for node in graph["nodes"]:
        args = [values[i] for i in node["inputs"]]
        op, opts = node["op"], node["options"]
        if op == "convTranspose2d":
            _check_options(node, {**conv_options, "padding": [0, 0, 0, 0], "outputPadding": None})
            if any(opts.get("outputPadding", [0, 0])):
                raise WebNNFormError(f"node {node['id']}: output padding is not evaluated here")
            out = _conv_transpose2d(args[0], args[1], opts.get("strides", [1, 1]))
        elif op == "conv2d":
            _check_options(node, conv_options)
            out = _conv2d(
                args[0], args[1], opts.get("strides", [1, 1]), opts.get("padding", [0, 0, 0, 0])
            )
        elif op == "slice":
            _check_options(node, {"starts": None, "sizes": None})
            index = tuple(
                slice(int(s), int(s) + _resolve(z, dims))
                for s, z in zip(opts["starts"], opts["sizes"], strict=True)
            )
            out = args[0][index]
            if list(out.shape) != [_resolve(z, dims) for z in opts["sizes"]]:
                raise WebNNFormError(f"node {node['id']}: slice out of range")
        elif op in ("mul", "add"):
            _check_options(node, {})
            out = args[0] * args[1] if op == "mul" else args[0] + args[1]
        elif op == "sqrt":
            _check_options(node, {})
            out = np.sqrt(args[0])
        else:
            raise WebNNFormError(f"node {node['id']}: op {op!r} is not evaluated here")
        if op in ("convTranspose2d", "conv2d") and len(args) == 3:
            out = out + args[2][None, :, None, None]
        values[node["id"]] = out
    return {binding: values[ref] for binding, ref in graph["outputs"].items()}
