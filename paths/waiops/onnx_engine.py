"""The fast engine for a ``wai-ops/1`` program whose every value, intermediate and partial sum
is proven below 2^24 (:attr:`Program.float32_exact`): the program as one float32 ONNX graph on
the CPU, transposed convolutions split into phases as the float path does.

Exact because every number the graph computes is an integer below 2^24 (or a power-of-two
scaling of one, taken back by ``Floor``) (docs/wai-ops.md, "Why a float engine may compute it
exactly"); the inverse GDN's ``Floor(Sqrt(n))`` needs a correctly rounded square root, which
:func:`check_sqrt` confirms for this build. ``tests/paths/test_waiops_engine.py`` holds it to
the int64 reference bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np

from wai_dispatch.paths.onnx import arena_shrink_options, shared_session_options
from wai_dispatch.paths.onnx_rewrite import rewrite_model
from wai_dispatch.paths.waiops.program import Operation, Program
from wai_dispatch.paths.waiops.run import check_input
from wai_dispatch.setfacts.limits import Limits

OPSET = 17


def _f32(a: np.ndarray | float) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _per_channel(v: np.ndarray) -> np.ndarray:
    return _f32(v).reshape(1, -1, 1, 1)


class _Graph:
    def __init__(self) -> None:
        import onnx.helper  # noqa: F401  (fail early when onnx is absent)

        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(_f32(value), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        self._n += 1
        out = out or f"v{self._n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"n{self._n}_{op}", **attrs))
        return out


def _requant(
    g: _Graph, name: str, x: str, shift: np.ndarray, clamp: list[int] | None, floor: bool = False
) -> str:
    half = np.where(shift > 0, np.exp2(np.maximum(shift - 1, 0)), 0.0)
    if np.any(half):
        x = g.node("Add", [x, g.const(f"{name}.half", _per_channel(half))])
    if np.any(shift):
        x = g.node("Mul", [x, g.const(f"{name}.scale", _per_channel(np.exp2(-shift)))])
    if np.any(shift) or floor:
        x = g.node("Floor", [x])
    if clamp is None:
        return x
    return g.node(
        "Clip", [x, g.const(f"{name}.lo", _f32(clamp[0])), g.const(f"{name}.hi", _f32(clamp[1]))]
    )


def requantize_readers(program: Program) -> dict[str, Operation]:
    """Convolutions whose only reader is a ``requantize`` with multiplier 1: conv name → that
    requantize, whose rounding half can join the convolution's bias."""
    readers: dict[str, list[Operation]] = {}
    for op in program.operations:
        for v in op.inputs:
            readers.setdefault(v, []).append(op)
    out = {}
    for op in program.operations:
        users = readers.get(op.output, [])
        if (
            op.op in ("conv2d", "conv_transpose2d")
            and op.output != program.output_name
            and len(users) == 1
            and users[0].op == "requantize"
            and bool(np.all(users[0].params["multiplier"] == 1))
        ):
            out[op.name] = users[0]
    return out


def _fused(program: Program) -> dict[str, np.ndarray]:
    """The :func:`requantize_readers` whose ``+ 2^(s-1)`` goes into the bias and ``· 2^-s`` into
    the weights (exact: a power-of-two scaling of integers below 2^24), leaving ``Floor``:
    conv name → the requantize's shifts."""
    return {
        name: r.params["shift"]
        for name, r in requantize_readers(program).items()
        # every partial sum, with the bias and the half in any order, stays below 2^24
        if program.accumulators[name] + (1 << int(r.params["shift"].max())) < (1 << 24)
    }


def _folded(op: Operation, shift: np.ndarray) -> dict[str, np.ndarray]:
    """A convolution's weight and bias with its requantize's rounding half and scaling (by
    ``shift``, per output channel) folded in."""
    scale = np.exp2(-shift.astype(np.float64))
    half = np.where(shift > 0, np.exp2(np.maximum(shift - 1, 0)), 0.0)
    shape = [1, 1, 1, 1]
    shape[0 if op.op == "conv2d" else 1] = -1
    return {
        "weight": op.params["weight"] * scale.reshape(shape),
        "bias": (op.params["bias"] + half) * scale,
    }


def _op(
    g: _Graph,
    op: Operation,
    names: dict[str, str],
    fused: dict[str, np.ndarray],
    scaled: set[str],
) -> str:
    """One operation as ONNX nodes; ``scaled`` are values a fused convolution already rounded
    and scaled (their requantize is ``Floor`` and ``Clip``)."""
    x = names[op.inputs[0]]
    p, a, n = op.params, op.attrs, op.name
    if op.name in fused:
        p = _folded(op, fused[op.name])
    if op.op == "channel_affine":
        y = g.node("Mul", [x, g.const(f"{n}.scale", _per_channel(p["scale"]))])
        return g.node("Add", [y, g.const(f"{n}.offset", _per_channel(p["offset"]))])
    if op.op == "conv2d":
        k, pad = a["kernel"], a["padding"]
        return g.node(
            "Conv",
            [x, g.const(f"{n}.w", p["weight"]), g.const(f"{n}.b", p["bias"])],
            kernel_shape=[k, k],
            pads=[pad] * 4,
        )
    if op.op == "conv_transpose2d":
        k, s, pad, q = a["kernel"], a["stride"], a["padding"], a["output_padding"]
        return g.node(
            "ConvTranspose",
            [x, g.const(f"{n}.w", p["weight"]), g.const(f"{n}.b", p["bias"])],
            kernel_shape=[k, k],
            strides=[s, s],
            pads=[pad] * 4,
            output_padding=[q, q],
        )
    if op.op == "requantize":
        if op.inputs[0] in scaled:
            return _requant(g, n, x, np.zeros_like(p["shift"]), a["clamp"], floor=True)
        if np.any(p["multiplier"] != 1):
            x = g.node("Mul", [x, g.const(f"{n}.m", _per_channel(p["multiplier"]))])
        return _requant(g, n, x, p["shift"], a["clamp"])
    if op.op == "igdn":
        c = p["beta"].shape[0]
        sq = g.node("Mul", [x, x])
        q = _requant(g, f"{n}.sq", sq, np.full(c, a["square_shift"]), None)
        gamma = p["gamma"].reshape(c, c, 1, 1)
        nsum = g.node("Conv", [q, g.const(f"{n}.gamma", gamma), g.const(f"{n}.beta", p["beta"])])
        # Exact for n < 2^24 with a correctly rounded square root (docs/wai-ops.md);
        # OnnxEngine checks this build's Sqrt at every square and its predecessor first.
        r = g.node("Floor", [g.node("Sqrt", [nsum])])
        return _requant(g, n, g.node("Mul", [x, r]), p["shift"], a["clamp"])
    y = names[op.inputs[1]]
    return g.node("Add" if op.op == "add" else "Mul", [x, y])


def build_model(program: Program) -> bytes:
    """The program as a float32 ONNX model (``symbols`` in, the output out), phases split."""
    import onnx
    from onnx import TensorProto, helper

    if not program.float32_exact:
        raise ValueError("the program's bounds reach 2^24: float32 is not exact for it")
    g = _Graph()
    names = {program.input_name: "symbols"}
    fused = _fused(program)
    scaled = {op.output for op in program.operations if op.name in fused}
    for op in program.operations:
        names[op.output] = _op(g, op, names, fused, scaled)
    g.nodes.append(helper.make_node("Identity", [names[program.output_name]], ["out"], name="out"))
    graph = helper.make_graph(
        g.nodes,
        "wai-ops",
        [
            helper.make_tensor_value_info(
                "symbols", TensorProto.FLOAT, [1, program.input_channels, "h", "w"]
            )
        ],
        [
            helper.make_tensor_value_info(
                "out", TensorProto.FLOAT, [1, program.output_channels, None, None]
            )
        ],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    rewrite_model(model, {}, "split")
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


class SqrtNotExact(RuntimeError):
    """This ONNX Runtime build's ``Floor(Sqrt(n))`` is not the floor square root."""


_SQRT_CHECKED: list[bool] = []


def isqrt_check_model() -> bytes:
    """The graph :func:`check_sqrt` runs, ``Floor(Sqrt(n))`` on a float32 vector ``n`` to
    ``r``, as the graph of :func:`build_model` computes ``isqrt`` (the browser page runs it on
    ONNX Runtime Web before its ``cpu/wai-ops/integer`` path trusts that build)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Sqrt", ["n"], ["s"]), helper.make_node("Floor", ["s"], ["r"])],
        "isqrt-check",
        [helper.make_tensor_value_info("n", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def check_sqrt() -> None:
    """``Floor(Sqrt(n))`` in this ONNX Runtime build is ``isqrt(n)`` at every perfect square
    ``r²`` and every ``r² − 1`` below 2^24 (where a square root that is not correctly rounded
    would go wrong; between them a monotone square root cannot), checked once per process.
    Raises :class:`SqrtNotExact` otherwise: the caller uses the NumPy engine instead."""
    if _SQRT_CHECKED:
        return
    import onnxruntime as ort

    session = ort.InferenceSession(
        isqrt_check_model(), shared_session_options(), providers=["CPUExecutionProvider"]
    )
    r = np.arange(1, 4097, dtype=np.int64)
    n = np.concatenate([r * r, r * r - 1])
    want = np.concatenate([r, r - 1])
    (got,) = session.run(None, {"n": n.astype(np.float32)})
    if not np.array_equal(np.asarray(got).astype(np.int64), want):
        raise SqrtNotExact("ONNX Runtime's Sqrt is not correctly rounded on this build")
    _SQRT_CHECKED.append(True)


class OnnxEngine:
    """A float32-exact program compiled once into an ONNX Runtime session on the shared pool."""

    def __init__(self, program: Program) -> None:
        import onnxruntime as ort

        check_sqrt()
        self.program = program
        self.model = build_model(program)
        self.session = ort.InferenceSession(
            self.model, shared_session_options(), providers=["CPUExecutionProvider"]
        )

    def run(
        self, symbols: np.ndarray, limits: Limits | None = None, *, shrink_arena: bool = False
    ) -> np.ndarray:
        """The program on ``symbols`` (int [1, C, h, w]) → int32 [1, C', H, W];
        ``shrink_arena``: hand the run's activations back to the allocator once it ends (the
        last tile of a large decode, as :mod:`paths.onnx` does)."""
        x = check_input(self.program, symbols, limits).astype(np.float32)
        options = arena_shrink_options() if shrink_arena else None
        (out,) = self.session.run(["out"], {"symbols": x}, options)
        return np.asarray(out).astype(np.int32)
