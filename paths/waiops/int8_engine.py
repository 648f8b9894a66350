"""The int8 engine of ``wai-ops/1``: every convolution computed on the CPU's int8 × int8 → int32
units through ONNX Runtime's ``MatMulInteger``, exactly, on every CPU (docs/wai-ops.md, "Why the
int8 engine is exact on every CPU").

Each convolution is the per-phase GEMMs of :mod:`paths.waiops.engine`, the activations in 7-bit
unsigned planes and the weights in balanced base-255 digits, recombined exactly in int64; every
plane GEMM's partial sum (at most ``127 · 127 · K``) is checked below 2^31 here. The rest is
:class:`~paths.waiops.engine.Engine`'s. ``tests/paths/test_waiops_int8.py`` holds it to the
int64 reference bit for bit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_dispatch.paths.onnx import shared_session_options
from wai_dispatch.paths.waiops.engine import Engine, _Conv, _isqrt, _round_shift
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

        super().__init__(program)
        self._bits = PLANE_BITS
        self._offsets: dict[str, tuple[int, int]] = {}  # conv → (lo, planes)
        self._gemms: dict[str, list[_Gemm | None]] = {}
        options = shared_session_options()
        self._igdn: dict[str, tuple[int, _Gemm]] = {}  # igdn → (planes of q, its gamma GEMM)
        for op in program.operations:
            if op.op == "igdn":
                self._igdn[op.name] = self._igdn_gemm(op, options)
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
                bias = op.params["bias"].astype(np.int64)
                gemms.append(self._gemm(op.name, w, bias + low * w.sum(axis=0), options))
            self._gemms[op.name] = gemms

    def _gemm(self, name: str, w: np.ndarray, correction: np.ndarray, options: Any) -> _Gemm:
        """The session multiplying by integer weights ``w`` [K, Co] as int8 digits."""
        import onnxruntime as ort

        if ((1 << self._bits) - 1) * DIGIT_MAX * w.shape[0] >= 1 << 31:
            raise NotInt8Exact(f"{name}: {w.shape[0]} terms could pass int32")
        digits = weight_digits(w)
        b = np.ascontiguousarray(np.concatenate(digits, axis=1))
        session = ort.InferenceSession(
            _matmul_model(b), options, providers=["CPUExecutionProvider"]
        )
        return _Gemm(session, len(digits), correction)

    def _igdn_gemm(self, op: Operation, options: Any) -> tuple[int, _Gemm]:
        """The inverse GDN's 1×1 product ``n = β + γ · q`` on the int8 units: ``q = x² ≫ s``
        is at least 0 and at most ``(m² + half) ≫ s`` for ``m`` the largest ``|x|`` the bound
        rule proves (no offset needed), in 7-bit planes; γ as int8 digits."""
        lo, hi = self.program.bounds[op.inputs[0]]
        m = max(abs(int(lo.min())), abs(int(hi.max())))
        s = int(op.attrs["square_shift"])
        q_max = (m * m + ((1 << (s - 1)) if s > 0 else 0)) >> s
        gamma = np.rint(self._gamma[op.name]).astype(np.int64)  # [c_in, c_out], exact integers
        beta = op.params["beta"].astype(np.int64)
        return activation_planes(q_max, self._bits), self._gemm(op.name, gamma, beta, options)

    def _apply(self, op: Operation, values: dict[str, np.ndarray]) -> np.ndarray:
        if op.op in ("conv2d", "conv_transpose2d"):
            return self._conv8(op.name, self._convs[op.name], values[op.inputs[0]])
        if op.op == "igdn":
            return self._igdn8(op, values[op.inputs[0]])
        return super()._apply(op, values)

    def _igdn8(self, op: Operation, x: np.ndarray) -> np.ndarray:
        """The inverse GDN as :class:`Engine` computes it, its ``γ · q`` on the int8 units."""
        planes, gemm = self._igdn[op.name]
        h, w, c = x.shape
        q = _round_shift(x * x, op.attrs["square_shift"]).reshape(1, h * w, c)
        n = np.empty((h * w, c), dtype=np.int32)
        step = max(1, _CHUNK_BYTES // max(planes * c, 1))
        for r0 in range(0, h * w, step):
            r1 = min(h * w, r0 + step)
            plane = _planes_of(q[:, r0:r1], 0, planes, self._bits).reshape(-1, c)
            (y,) = gemm.session.run(None, {"a": plane})
            n[r0:r1] = _recombine(np.asarray(y), gemm, planes, self._bits, c)
        r = _isqrt(n.reshape(h, w, c))
        out: np.ndarray = np.clip(_round_shift(x * r, op.params["shift"]), *op.attrs["clamp"])
        return out.astype(np.int32)

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
        bits = self._bits
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
            plane = _planes(x, (top, bottom), (left, right), low, planes, bits)
            k = ph.weights.shape[0]
            step = max(1, _CHUNK_BYTES // max(planes * cols * k, 1))
            for r0 in range(0, rows, step):
                r1 = min(rows, r0 + step)
                a = _im2col(plane, ph.offsets, top + r0, r1 - r0, left, cols)
                (y,) = gemm.session.run(None, {"a": a})
                acc = _recombine(np.asarray(y), gemm, planes, bits, co)
                out[ph.a + r0 * c.stride : ph.a + r1 * c.stride : c.stride, ph.b :: c.stride] = (
                    acc.reshape(r1 - r0, cols, co)
                )
        return out


# The three stages of one phase's GEMM, as functions so that a profile names each
# (``bench int``'s profile line, :func:`tools.bench_int.int8_profile`).


def _planes(
    x: np.ndarray, pad_h: tuple[int, int], pad_w: tuple[int, int], low: int, n: int, bits: int
) -> np.ndarray:
    """``u = x − lo`` padded, as ``n`` uint8 planes of ``bits`` bits: [n, H', W', Ci]."""
    return _planes_of(np.pad(x, (pad_h, pad_w, (0, 0))), low, n, bits)


def _planes_of(x: np.ndarray, low: int, n: int, bits: int) -> np.ndarray:
    """``u = x − lo`` (``x`` in [lo, hi] by the bound rule) as ``n`` uint8 planes of ``bits``
    bits, stacked on a new first axis; ``u`` in int32 when ``n · bits`` < 31 bits hold it."""
    u = x.astype(np.int32 if n * bits < 31 and abs(low) < 1 << 30 else np.int64) - low
    top = (1 << bits) - 1
    return np.stack([(np.right_shift(u, bits * j) & top).astype(np.uint8) for j in range(n)])


def _im2col(
    plane: np.ndarray, offsets: Any, row0: int, rows: int, left: int, cols: int
) -> np.ndarray:
    """The GEMM's left operand: every plane's patches, [planes · rows · cols, K] uint8."""
    patches = [
        plane[:, row0 + dy : row0 + dy + rows, left + dx : left + dx + cols] for dy, dx in offsets
    ]
    return np.concatenate(patches, axis=3).reshape(-1, patches[0].shape[3] * len(patches))


def _recombine(y: np.ndarray, gemm: _Gemm, planes: int, bits: int, co: int) -> np.ndarray:
    """The plane × digit partial sums ([planes · n, digits · Co] int32) shifted and added with
    the correction, in int64 (exact), → [n, Co] int32 (inside int32 by the bound rule)."""
    y = y.reshape(planes, -1, gemm.digits, co)
    acc = np.broadcast_to(gemm.correction, (y.shape[1], co)).copy()
    for j in range(planes):
        for i in range(gemm.digits):
            acc += y[j, :, i].astype(np.int64) * ((1 << (bits * j)) * DIGIT_BASE**i)
    return acc.astype(np.int32)
