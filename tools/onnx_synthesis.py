"""A synthesis (a list of bmshj2018 layers) written as the set writer's format does, for the tests
and the ONNX benchmarks: :func:`synthesis_files` writes ``decoder.onnx`` with its initializers as
external data in ``decoder.weights``, :func:`memory_set` holds it in memory as a set, and
:func:`ort_session` opens it (or its sub-pixel rewrite, :func:`rewritten_model`) in ONNX Runtime."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.paths.onnx_rewrite import rewrite_model

# (kind, a, b): ("deconv", weight [Cin, Cout, 5, 5], bias [Cout]) or
# ("igdn", gamma [C, C], beta [C]) with GDN's reparameterised values.
Layer = tuple[str, np.ndarray, np.ndarray]


def onnx_program_facts() -> dict[str, Any]:
    return {
        "programs": {
            "onnx-runtime": {
                "file": "decoder.onnx",
                "weights": "decoder.weights",
                "input": "latent",
                "output": "x_hat",
            }
        }
    }


def synthesis_files(layers: Sequence[Layer]) -> tuple[bytes, bytes]:
    """``(decoder.onnx, decoder.weights)``: the plain synthesis, ConvTranspose k5 s2 p2 op1
    and inverse GDN as ``x · sqrt(conv1x1(x·x, γ) + β)``, initializers as external data."""
    import onnx
    from onnx import TensorProto, helper

    weights = bytearray()
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def add(name: str, arr: np.ndarray) -> str:
        arr = np.ascontiguousarray(arr, dtype="<f4")
        while len(weights) % 64:
            weights.append(0)
        t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, dims=arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", "decoder.weights"),
            ("offset", str(len(weights))),
            ("length", str(arr.nbytes)),
        ):
            t.external_data.add(key=key, value=value)
        weights.extend(arr.tobytes())
        inits.append(t)
        return name

    x = "latent"
    channels = int(layers[0][1].shape[0])
    for i, (kind, a, b) in enumerate(layers):
        y = "x_hat" if i == len(layers) - 1 else f"l{i}"
        if kind == "deconv":
            w, bias = add(f"l{i}.weight", a), add(f"l{i}.bias", b)
            nodes.append(
                helper.make_node(
                    "ConvTranspose",
                    [x, w, bias],
                    [y],
                    name=f"l{i}.deconv",
                    kernel_shape=[5, 5],
                    strides=[2, 2],
                    pads=[2, 2, 2, 2],
                    output_padding=[1, 1],
                )
            )
        elif kind == "igdn":
            c = a.shape[0]
            g, beta = add(f"l{i}.gamma", a.reshape(c, c, 1, 1)), add(f"l{i}.beta", b)
            nodes += [
                helper.make_node("Mul", [x, x], [f"l{i}.sq"], name=f"l{i}.sq"),
                helper.make_node("Conv", [f"l{i}.sq", g, beta], [f"l{i}.norm"], name=f"l{i}.norm"),
                helper.make_node("Sqrt", [f"l{i}.norm"], [f"l{i}.sqrt"], name=f"l{i}.sqrt"),
                helper.make_node("Mul", [x, f"l{i}.sqrt"], [y], name=f"l{i}.out"),
            ]
        else:
            raise ValueError(f"layer kind {kind!r} is deconv or igdn")
        x = y
    graph = helper.make_graph(
        nodes,
        "synthesis",
        [helper.make_tensor_value_info("latent", TensorProto.FLOAT, [1, channels, "h", "w"])],
        [helper.make_tensor_value_info("x_hat", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString(), bytes(weights)


def memory_set(layers: Sequence[Layer]) -> LoadedSet:
    model, weights = synthesis_files(layers)
    files = {"decoder.onnx": model, "decoder.weights": weights}
    return LoadedSet.from_files(files, facts=onnx_program_facts())


def random_layers(m: int = 192, n: int = 128, seed: int = 0) -> list[Layer]:
    """A bmshj2018-shaped synthesis (M→N→N→N→3) with random weights of sane scale."""
    rng = np.random.default_rng(seed)
    layers: list[Layer] = []
    chans = [(m, n), (n, n), (n, n), (n, 3)]
    for i, (cin, cout) in enumerate(chans):
        last = i == len(chans) - 1
        # 5×5 stride 2: each output sums ~cin·25/4 terms; the last layer brings x_hat to ~[0, 1]
        w = rng.normal(0, (0.005 if last else 1) / np.sqrt(cin * 25 / 4), (cin, cout, 5, 5))
        b = np.full(cout, 0.5) if last else rng.normal(0, 0.05, cout)
        layers.append(("deconv", w.astype(np.float32), b.astype(np.float32)))
        if not last:
            gamma = np.abs(rng.normal(0, 0.002, (cout, cout))) + 0.05 * np.eye(cout)
            beta = 1 + np.abs(rng.normal(0, 0.1, cout))
            layers.append(("igdn", gamma.astype(np.float32), beta.astype(np.float32)))
    return layers


def g_s_layers(g_s: Any) -> list[Layer]:
    """The layers of a CompressAI ``g_s`` (ConvTranspose2d and inverse GDN), GDN's β and γ
    taken as values (``beta_reparam(beta)``, ``gamma_reparam(gamma)``)."""
    import torch

    layers: list[Layer] = []
    with torch.no_grad():
        for module in g_s:
            if isinstance(module, torch.nn.ConvTranspose2d):
                w = module.weight.numpy().copy()
                b = np.zeros(w.shape[1], np.float32) if module.bias is None else module.bias.numpy()
                layers.append(("deconv", w, b.copy()))
            elif type(module).__name__ == "GDN" and module.inverse:
                beta = module.beta_reparam(module.beta).numpy().copy()
                gamma = module.gamma_reparam(module.gamma).numpy().copy()
                layers.append(("igdn", gamma, beta))
            else:
                raise ValueError(f"unexpected synthesis layer {module!r}")
    return layers


def synthesis_flops(model: bytes, latent_hw: tuple[int, int], channels: int) -> int:
    """2 × the multiply-accumulates of the graph's Conv and ConvTranspose nodes for a latent
    of ``latent_hw`` (the useful work: a rewritten graph is counted on its plain form)."""
    import onnx
    from onnx import shape_inference

    proto = onnx.load_from_string(model)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    for d, v in zip(dims, (1, channels, *latent_hw), strict=True):
        d.Clear()
        d.dim_value = v
    proto = shape_inference.infer_shapes(proto)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*proto.graph.value_info, *proto.graph.input, *proto.graph.output]
    }
    wshape = {t.name: list(t.dims) for t in proto.graph.initializer}
    macs = 0
    for node in proto.graph.node:
        if node.op_type == "Conv":
            cout, cin_g, kh, kw = wshape[node.input[1]]
            _, _, ho, wo = shapes[node.output[0]]
            macs += cout * cin_g * kh * kw * ho * wo
        elif node.op_type == "ConvTranspose":
            cin, cout_g, kh, kw = wshape[node.input[1]]
            _, _, hi, wi = shapes[node.input[0]]
            macs += cin * cout_g * kh * kw * hi * wi
    return 2 * macs


def ort_session(model: bytes, weights: bytes, *, pool: str = "global", spin: bool = True) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_external_initializers_from_files_in_memory(
        ["decoder.weights"], [weights], [len(weights)]
    )
    if pool == "global":
        so.use_per_session_threads = False
    else:
        so.intra_op_num_threads = int(pool)
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def rewritten_model(model: bytes, weights: bytes) -> bytes:
    import onnx

    proto = onnx.load_from_string(model)
    rewrite_model(proto, {"decoder.weights": weights})
    return bytes(proto.SerializeToString())
