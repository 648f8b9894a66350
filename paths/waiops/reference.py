"""The reference interpreter of ``wai-ops/1``: every operation of docs/wai-ops.md written out
in NumPy int64, tap by tap, as the page defines it. Slow and obviously right; the fast engine
(:mod:`paths.waiops.engine`) is held to it bit for bit."""

from __future__ import annotations

import numpy as np

from wai_dispatch.paths.waiops.program import INT32_MAX, INT32_MIN, Operation, Program
from wai_dispatch.paths.waiops.run import check_input


def round_shift(v: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """``round_shift`` of docs/wai-ops.md: ties toward +inf; ``s`` per element (broadcast)."""
    s = np.asarray(s, dtype=np.int64)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    out: np.ndarray = np.right_shift(v + half, s)
    return out


def isqrt(n: np.ndarray) -> np.ndarray:
    """Floor square root of int64 values in 0…2^31: a float64 estimate, then corrected."""
    r = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    r = np.where(r * r > n, r - 1, r)
    out: np.ndarray = np.where((r + 1) * (r + 1) <= n, r + 1, r)
    return out


def _in_int32(op: Operation, v: np.ndarray) -> np.ndarray:
    # A value outside int32 here means the bound rule (bounds.py) is wrong: a bug, not input.
    if v.size and (int(v.min()) < INT32_MIN or int(v.max()) > INT32_MAX):
        raise AssertionError(f"{op.name}: a value left int32 despite the bound rule")
    return v


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, k: int, p: int) -> np.ndarray:
    """``x`` [Ci, H, W], ``w`` [Co, Ci, k, k]: ``y[o,v,u] = b[o] + Σ w·x[i, v-p+ky, u-p+kx]``."""
    _, h, wd = x.shape
    ho, wo = h + 2 * p - k + 1, wd + 2 * p - k + 1
    xp = np.pad(x, ((0, 0), (p, p), (p, p)))
    y = np.broadcast_to(b[:, None, None], (w.shape[0], ho, wo)).copy()
    for ky in range(k):
        for kx in range(k):
            y += np.einsum("oi,ihw->ohw", w[:, :, ky, kx], xp[:, ky : ky + ho, kx : kx + wo])
    return y


def conv_transpose2d(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, k: int, s: int, p: int, q: int
) -> np.ndarray:
    """``x`` [Ci, H, W], ``w`` [Ci, Co, k, k]: each input position scatters its taps to
    ``v = iy·s − p + ky``; the full scatter is cropped at ``p``."""
    _, h, wd = x.shape
    co = w.shape[1]
    ho, wo = (h - 1) * s - 2 * p + k + q, (wd - 1) * s - 2 * p + k + q
    full = np.zeros((co, (h - 1) * s + k + q, (wd - 1) * s + k + q), dtype=np.int64)
    for ky in range(k):
        for kx in range(k):
            contrib = np.einsum("io,ihw->ohw", w[:, :, ky, kx], x)
            full[:, ky : ky + (h - 1) * s + 1 : s, kx : kx + (wd - 1) * s + 1 : s] += contrib
    out: np.ndarray = full[:, p : p + ho, p : p + wo] + b[:, None, None]
    return out


def igdn(x: np.ndarray, op: Operation) -> np.ndarray:
    p = op.params
    q = round_shift(x * x, op.attrs["square_shift"])
    n = p["beta"][:, None, None] + np.einsum("oi,ihw->ohw", p["gamma"], q)
    r = isqrt(_in_int32(op, n))
    prod = _in_int32(op, x * r)
    lo, hi = op.attrs["clamp"]
    out: np.ndarray = np.clip(round_shift(prod, p["shift"][:, None, None]), lo, hi)
    return out


def apply(op: Operation, values: dict[str, np.ndarray]) -> np.ndarray:
    """One operation on [C, H, W] int64 values."""
    x = values[op.inputs[0]]
    p, a = op.params, op.attrs
    out: np.ndarray  # NumPy's stubs give Any for the broadcast arithmetic below
    if op.op == "channel_affine":
        out = x * p["scale"][:, None, None] + p["offset"][:, None, None]
        return out
    if op.op == "conv2d":
        return conv2d(x, p["weight"], p["bias"], a["kernel"], a["padding"])
    if op.op == "conv_transpose2d":
        k, s = a["kernel"], a["stride"]
        return conv_transpose2d(x, p["weight"], p["bias"], k, s, a["padding"], a["output_padding"])
    if op.op == "requantize":
        prod = _in_int32(op, x * p["multiplier"][:, None, None])
        lo, hi = a["clamp"]
        out = np.clip(round_shift(prod, p["shift"][:, None, None]), lo, hi)
        return out
    if op.op == "igdn":
        return igdn(x, op)
    y = values[op.inputs[1]]
    out = x + y if op.op == "add" else x * y
    return out


def run(program: Program, symbols: np.ndarray) -> np.ndarray:
    """The program on ``symbols`` (int [1, C, h, w]); the output as int32 [1, C', H, W]."""
    values: dict[str, np.ndarray] = {
        program.input_name: check_input(program, symbols)[0].astype(np.int64)
    }
    for op in program.operations:
        values[op.output] = _in_int32(op, apply(op, values))
    return values[program.output_name][None].astype(np.int32)
