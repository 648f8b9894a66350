"""The fast exact engine of ``wai-ops/1``: the same operations as :mod:`paths.waiops.reference`,
with every convolution computed as per-phase GEMMs in floating point where that is provably
exact (docs/wai-ops.md, "Why a float engine may compute it exactly"): float32 when the
operation's proven accumulator bound and its inputs are below 2^24, else float64 (every
partial sum is below 2^31 by the bound rule). Elementwise steps run in int32, which the bound
rule makes overflow-free. Activations are kept height × width × channels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wai_dispatch.paths.waiops.program import Operation, Program
from wai_dispatch.paths.waiops.run import check_input
from wai_dispatch.setfacts.limits import Limits

_F32_EXACT = 1 << 24
#: Rows of one GEMM's column matrix at most (its size bounds the engine's scratch memory).
_CHUNK_ELEMS = 1 << 22


@dataclass(frozen=True)
class _Phase:
    """One output sub-grid (rows ≡ a, columns ≡ b mod stride) of a convolution: the input
    offsets of its taps, and the weights of those taps as one [taps·Ci, Co] matrix."""

    a: int
    b: int
    offsets: tuple[tuple[int, int], ...]
    weights: np.ndarray


@dataclass(frozen=True)
class _Conv:
    stride: int
    kernel: int
    padding: int
    extra: int  # output size = (n - 1)·stride − 2p + k + extra (conv2d: n + 2p − k + 1)
    transposed: bool
    phases: tuple[_Phase, ...]
    bias: np.ndarray
    dtype: type[np.float32] | type[np.float64]


def _plan_conv(op: Operation, program: Program) -> _Conv:
    a = op.attrs
    k, p = a["kernel"], a["padding"]
    w = op.params["weight"]  # conv2d [Co, Ci, k, k]; transposed [Ci, Co, k, k]
    xlo, xhi = program.bounds[op.inputs[0]]
    small = op_acc_small(program, op) and max(-int(xlo.min()), int(xhi.max())) <= _F32_EXACT
    dtype = np.float32 if small else np.float64
    phases: list[_Phase] = []
    if op.op == "conv2d":
        taps = [(ky, kx) for ky in range(k) for kx in range(k)]
        offsets = tuple((ky - p, kx - p) for ky, kx in taps)
        mat = np.concatenate([w[:, :, ky, kx].T for ky, kx in taps], axis=0)
        phases.append(_Phase(0, 0, offsets, mat.astype(dtype)))
        return _Conv(1, k, p, 0, False, tuple(phases), op.params["bias"].astype(dtype), dtype)
    s, q = a["stride"], a["output_padding"]
    for ra in range(s):
        for rb in range(s):
            kys = [ky for ky in range(k) if (ra + p - ky) % s == 0]
            kxs = [kx for kx in range(k) if (rb + p - kx) % s == 0]
            taps = [(ky, kx) for ky in kys for kx in kxs]
            offsets = tuple(((ra + p - ky) // s, (rb + p - kx) // s) for ky, kx in taps)
            if taps:
                mat = np.concatenate([w[:, :, ky, kx] for ky, kx in taps], axis=0)
            else:
                mat = np.zeros((0, w.shape[1]), dtype=np.int64)
            phases.append(_Phase(ra, rb, offsets, mat.astype(dtype)))
    return _Conv(s, k, p, q, True, tuple(phases), op.params["bias"].astype(dtype), dtype)


def op_acc_small(program: Program, op: Operation) -> bool:
    """Whether the operation's proven accumulator bound lets float32 sum it exactly."""
    return program.accumulators.get(op.name, _F32_EXACT) < _F32_EXACT


def _conv(c: _Conv, x: np.ndarray) -> np.ndarray:
    """``x`` [H, W, Ci] (int32) → [Ho, Wo, Co] int32, exactly (module docstring)."""
    h, w, _ = x.shape
    co = c.bias.shape[0]
    if c.transposed:
        ho = (h - 1) * c.stride - 2 * c.padding + c.kernel + c.extra
        wo = (w - 1) * c.stride - 2 * c.padding + c.kernel + c.extra
    else:
        ho, wo = h + 2 * c.padding - c.kernel + 1, w + 2 * c.padding - c.kernel + 1
    out = np.empty((ho, wo, co), dtype=np.int32)
    xf = x.astype(c.dtype)
    for ph in c.phases:
        rows = (ho - ph.a + c.stride - 1) // c.stride
        cols = (wo - ph.b + c.stride - 1) // c.stride
        if rows <= 0 or cols <= 0:
            continue
        if not ph.offsets:
            out[ph.a :: c.stride, ph.b :: c.stride] = c.bias.astype(np.int32)
            continue
        dys = [d[0] for d in ph.offsets]
        dxs = [d[1] for d in ph.offsets]
        top, left = max(0, -min(dys)), max(0, -min(dxs))
        bottom = max(0, rows - 1 + max(dys) - (h - 1))
        right = max(0, cols - 1 + max(dxs) - (w - 1))
        xp = np.pad(xf, ((top, bottom), (left, right), (0, 0)))
        per_row = cols * ph.weights.shape[0]
        step = max(1, _CHUNK_ELEMS // max(per_row, 1))
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            patches = [
                xp[top + dy + r0 : top + dy + r1, left + dx : left + dx + cols]
                for dy, dx in ph.offsets
            ]
            m = np.concatenate(patches, axis=2).reshape((r1 - r0) * cols, -1)
            acc = m @ ph.weights
            acc += c.bias
            out[ph.a + r0 * c.stride : ph.a + r1 * c.stride : c.stride, ph.b :: c.stride] = (
                acc.reshape(r1 - r0, cols, co).astype(np.int32)
            )
    return out


def _round_shift(v: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    s = np.asarray(s, dtype=np.int32)
    half = np.where(s > 0, np.left_shift(np.int32(1), np.maximum(s - 1, 0)), 0).astype(np.int32)
    out: np.ndarray = np.right_shift(v + half, s)
    return out


def _isqrt(n: np.ndarray) -> np.ndarray:
    r = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    n64 = n.astype(np.int64)
    r = np.where(r * r > n64, r - 1, r)
    return np.where((r + 1) * (r + 1) <= n64, r + 1, r).astype(np.int32)


class Engine:
    """A program prepared for fast runs (weight matrices laid out once); thread-safe."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._convs = {
            op.name: _plan_conv(op, program)
            for op in program.operations
            if op.op in ("conv2d", "conv_transpose2d")
        }
        self._gamma = {
            op.name: op.params["gamma"].T.astype(np.float64)
            for op in program.operations
            if op.op == "igdn"
        }

    def run(
        self, symbols: np.ndarray, limits: Limits | None = None, *, shrink_arena: bool = False
    ) -> np.ndarray:
        """The program on ``symbols`` (int [1, C, h, w]) → int32 [1, C', H, W]
        (``shrink_arena``: nothing to do, NumPy keeps no arena)."""
        x = check_input(self.program, symbols, limits)
        values = {self.program.input_name: np.ascontiguousarray(x[0].transpose(1, 2, 0))}
        for op in self.program.operations:
            values[op.output] = self._apply(op, values)
        out = values[self.program.output_name]
        return np.ascontiguousarray(out.transpose(2, 0, 1))[None]

    def _apply(self, op: Operation, values: dict[str, np.ndarray]) -> np.ndarray:
        x = values[op.inputs[0]]
        p, a = op.params, op.attrs
        out: np.ndarray  # NumPy's stubs give Any for clip with the attrs' bounds, and for x + y
        if op.op == "channel_affine":
            return x * p["scale"].astype(np.int32) + p["offset"].astype(np.int32)
        if op.op in ("conv2d", "conv_transpose2d"):
            return _conv(self._convs[op.name], x)
        if op.op == "requantize":
            prod = x * p["multiplier"].astype(np.int32)
            out = np.clip(_round_shift(prod, p["shift"]), *a["clamp"]).astype(np.int32)
            return out
        if op.op == "igdn":
            q = _round_shift(x * x, a["square_shift"])
            n = (q.astype(np.float64) @ self._gamma[op.name]).astype(np.int32)
            n += p["beta"].astype(np.int32)
            r = _isqrt(n)
            y = _round_shift(x * r, p["shift"])
            out = np.clip(y, *a["clamp"]).astype(np.int32)
            return out
        y = values[op.inputs[1]]
        out = x + y if op.op == "add" else x * y
        return out
