"""The int8 engine of ``wai-ops/1``: every convolution and transposed convolution computed on
the CPU's int8 × int8 → int32 units through ONNX Runtime's ``MatMulInteger``, exactly, on
every CPU (docs/wai-ops.md, "Why the int8 engine is exact on every CPU").

Each convolution is the per-phase GEMMs of :mod:`paths.waiops.engine` (a transposed
convolution split into its stride² phases), with the integers split into narrow planes:

- the activations ``x`` (int32, proven in ``[lo, hi]``) as ``u = x − lo ≥ 0`` in **7-bit
  unsigned planes** ``u = Σ_j 128^j · a_j``, ``a_j ∈ [0, 127]`` (uint8), the planes stacked
  as rows of the GEMM's left operand;
- the weights as **balanced base-255 digits** ``w = Σ_i 255^i · b_i``, ``b_i ∈ [−127, 127]``
  (int8), the digits stacked as columns of the right operand (one digit for int8 weights in
  ``[−127, 127]``);

so one ``MatMulInteger`` (uint8 × int8) per phase computes every plane × digit product, and
``Σ_k w_k x_k = Σ_j Σ_i 128^j 255^i (Σ_k a_jk b_ik) + lo · Σ_k w_k`` recombines them exactly
(in int64; the result is the accumulator, inside int32 by the bound rule). Every pair of
products ``|a b + a' b'| ≤ 2 · 127 · 127 < 2^15`` (also when a kernel flips one operand's
sign bit), so no 16-bit intermediate of any kernel saturates; every plane GEMM's partial sum
is at most ``127 · 127 · K`` in magnitude, checked below 2^31 here. The requantisation, the
inverse GDN and the clamps are :class:`~paths.waiops.engine.Engine`'s (int32, exact).
``tests/paths/test_waiops_int8.py`` holds it to the int64 reference bit for bit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_dispatch.paths.onnx import shared_session_options
from wai_dispatch.paths.waiops.engine import Engine, _Conv
from wai_dispatch.paths.waiops.program import Operation, Program

#: Bits of one activation plane: 7, so a plane value is at most 127 (docs/wai-ops.md).
PLANE_BITS = 7
#: Weight digits lie in [−DIGIT_MAX, DIGIT_MAX], base 2·DIGIT_MAX + 1 = 255.
DIGIT_MAX = 127
DIGIT_BASE = 2 * DIGIT_MAX + 1
#: Rows × K of one GEMM's left operand at most (its size bounds the engine's scratch memory).
_CHUNK_BYTES = 1 << 24


class NotInt8Exact(ValueError):
    """A program the int8 engine does not take (a GEMM whose plane sums could pass int32)."""


def weight_digits(w: np.ndarray) -> list[np.ndarray]:
    """Balanced base-255 digits of integer weights: ``w = Σ_i 255^i · d_i``, each digit int8
    in [−127, 127]; one digit when every weight already lies there."""
    rest = np.asarray(w, dtype=np.int64)
    digits = []
    while True:
        d = (rest + DIGIT_MAX) % DIGIT_BASE - DIGIT_MAX
        digits.append(d.astype(np.int8))
        rest = (rest - d) // DIGIT_BASE
        if not rest.any():
            return digits


def set_plane_bits(bits: int) -> None:
    """Engines built after this call use ``bits``-bit planes: only for showing what 8-bit
    planes do on a saturating kernel (``tools/int8_check.py``, the tests); 7 is the engine's."""
    global PLANE_BITS
    if not 1 <= bits <= 8:
        raise ValueError("plane bits are 1…8")
    PLANE_BITS = bits


def activation_planes(span: int, bits: int = 7) -> int:
    """How many ``bits``-bit planes hold every ``u`` in [0, span]."""
    return max(1, -(-max(span, 1).bit_length() // bits))


@dataclass(frozen=True)
class _Gemm:
    """One phase's right operand: the weight digits side by side ([K, digits·Co], int8), the
    ONNX Runtime session that multiplies by it, and the per-channel correction."""

    session: Any
    digits: int
    correction: np.ndarray  # int64 [Co]: bias + lo · Σ_k w_k


def _matmul_model(b: np.ndarray) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "wai-ops-int8",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, b.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, b.shape[1]])],
        [numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


class Int8Engine(Engine):
    """A program prepared for the int8 engine: weight digits laid out and one ONNX Runtime
    ``MatMulInteger`` session per convolution phase, built once; thread-safe."""

    name = "int8"

    def __init__(self, program: Program) -> None:
        import onnxruntime as ort

        super().__init__(program)
        self._bits = PLANE_BITS
        self._offsets: dict[str, tuple[int, int]] = {}  # conv → (lo, planes)
        self._gemms: dict[str, list[_Gemm | None]] = {}
        options = shared_session_options()
        for op in program.operations:
            if op.op not in ("conv2d", "conv_transpose2d"):
                continue
            lo, hi = program.bounds[op.inputs[0]]
            low, span = int(lo.min()), int(hi.max()) - int(lo.min())
            planes = activation_planes(span, self._bits)
            self._offsets[op.name] = (low, planes)
            plan = self._convs[op.name]
            gemms: list[_Gemm | None] = []
            for ph in plan.phases:
                w = np.rint(ph.weights).astype(np.int64)  # exact: |w| < 2^15
                if w.shape[0] == 0:
                    gemms.append(None)
                    continue
                if ((1 << self._bits) - 1) * DIGIT_MAX * w.shape[0] >= 1 << 31:
                    raise NotInt8Exact(f"{op.name}: {w.shape[0]} terms could pass int32")
                digits = weight_digits(w)
                b = np.ascontiguousarray(np.concatenate(digits, axis=1))
                session = ort.InferenceSession(
                    _matmul_model(b), options, providers=["CPUExecutionProvider"]
                )
                bias = op.params["bias"].astype(np.int64)
                gemms.append(_Gemm(session, len(digits), bias + low * w.sum(axis=0)))
            self._gemms[op.name] = gemms

    def _apply(self, op: Operation, values: dict[str, np.ndarray]) -> np.ndarray:
        if op.op in ("conv2d", "conv_transpose2d"):
            return self._conv8(op.name, self._convs[op.name], values[op.inputs[0]])
        return super()._apply(op, values)

    def _conv8(self, name: str, c: _Conv, x: np.ndarray) -> np.ndarray:
        """``x`` [H, W, Ci] (int32) → [Ho, Wo, Co] int32, exactly (module docstring)."""
        h, w, _ = x.shape
        co = c.bias.shape[0]
        if c.transposed:
            ho = (h - 1) * c.stride - 2 * c.padding + c.kernel + c.extra
            wo = (w - 1) * c.stride - 2 * c.padding + c.kernel + c.extra
        else:
            ho, wo = h + 2 * c.padding - c.kernel + 1, w + 2 * c.padding - c.kernel + 1
        out = np.empty((ho, wo, co), dtype=np.int32)
        low, planes = self._offsets[name]
        bits, top_value = self._bits, (1 << self._bits) - 1
        for ph, gemm in zip(c.phases, self._gemms[name], strict=True):
            rows = (ho - ph.a + c.stride - 1) // c.stride
            cols = (wo - ph.b + c.stride - 1) // c.stride
            if rows <= 0 or cols <= 0:
                continue
            if gemm is None:
                out[ph.a :: c.stride, ph.b :: c.stride] = c.bias.astype(np.int32)
                continue
            dys = [d[0] for d in ph.offsets]
            dxs = [d[1] for d in ph.offsets]
            top, left = max(0, -min(dys)), max(0, -min(dxs))
            bottom = max(0, rows - 1 + max(dys) - (h - 1))
            right = max(0, cols - 1 + max(dxs) - (w - 1))
            # padding is x = 0, i.e. u = −lo: the correction's −lo·Σw covers it everywhere
            u = np.pad(x, ((top, bottom), (left, right), (0, 0))).astype(np.int64) - low
            plane = np.stack(
                [((u >> (bits * j)) & top_value).astype(np.uint8) for j in range(planes)]
            )
            k = ph.weights.shape[0]
            step = max(1, _CHUNK_BYTES // max(planes * cols * k, 1))
            for r0 in range(0, rows, step):
                r1 = min(rows, r0 + step)
                patches = [
                    plane[:, top + dy + r0 : top + dy + r1, left + dx : left + dx + cols]
                    for dy, dx in ph.offsets
                ]
                a = np.concatenate(patches, axis=3).reshape(planes * (r1 - r0) * cols, k)
                (y,) = gemm.session.run(None, {"a": a})
                y = np.asarray(y).reshape(planes, (r1 - r0) * cols, gemm.digits, co)
                acc = np.broadcast_to(gemm.correction, ((r1 - r0) * cols, co)).copy()
                for j in range(planes):
                    for i in range(gemm.digits):
                        acc += y[j, :, i].astype(np.int64) * ((1 << (bits * j)) * DIGIT_BASE**i)
                out[ph.a + r0 * c.stride : ph.a + r1 * c.stride : c.stride, ph.b :: c.stride] = (
                    acc.reshape(r1 - r0, cols, co).astype(np.int32)
                )
        return out
