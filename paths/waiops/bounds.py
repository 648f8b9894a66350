"""The bound rule of ``wai-ops/1`` (docs/wai-ops.md): propagate each value's proven per-channel
interval through the program from the declared input range and the actual weights, and refuse
the program (:class:`BoundExceeded`, naming the operation, the quantity and the bound) if any
intermediate, partial sum or output can leave int32."""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np

from wai_dispatch.paths.waiops.errors import BoundExceeded, WaiOpsError
from wai_dispatch.paths.waiops.program import INT32_MAX, INT32_MIN, Operation, Program

Interval = tuple[np.ndarray, np.ndarray]  # lo, hi per channel (int64 or Python-int objects)


_largest: list[int] = [0]  # the largest |bound| of the program being proved (under _LOCK)
_LOCK = threading.Lock()


def _check(op: Operation, what: str, lo: np.ndarray, hi: np.ndarray) -> None:
    """Refuse when any channel's interval leaves int32 (values are exact Python ints)."""
    lo_min, hi_max = int(np.min(lo)), int(np.max(hi))
    _largest[0] = max(_largest[0], -lo_min, hi_max)
    if hi_max > INT32_MAX:
        ch = int(np.argmax(hi))
        raise BoundExceeded(
            f"{op.name}: {what} of channel {ch} reaches {hi_max} > 2^31 - 1 (bound rule)"
        )
    if lo_min < INT32_MIN:
        ch = int(np.argmin(lo))
        raise BoundExceeded(
            f"{op.name}: {what} of channel {ch} reaches {lo_min} < -2^31 (bound rule)"
        )


def _obj(a: np.ndarray) -> np.ndarray:
    """Exact Python-int arithmetic: products of two int32 bounds and their sums may pass int64."""
    return np.asarray(a, dtype=np.int64).astype(object)


def _ext(a_lo: np.ndarray, a_hi: np.ndarray, b_lo: np.ndarray, b_hi: np.ndarray) -> Interval:
    cands = [a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi]
    lo = np.minimum.reduce(cands)
    hi = np.maximum.reduce(cands)
    return lo, hi


def _round_shift(v: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = np.empty_like(v)
    for idx in np.ndindex(v.shape):
        sh = int(s[idx]) if np.ndim(s) else int(s)
        x = int(v[idx])
        out[idx] = x if sh == 0 else (x + (1 << (sh - 1))) >> sh
    return out


def _isqrt(v: np.ndarray) -> np.ndarray:
    return np.array([math.isqrt(int(x)) for x in v], dtype=object)


def prove(program: Program, *, rgb8_output: bool = False) -> Program:
    """Return ``program`` with its proven intervals and accumulator bounds, or raise."""
    with _LOCK:
        return _prove(program, rgb8_output)


def _prove(program: Program, rgb8_output: bool) -> Program:
    lo0, hi0 = program.input_range
    c = program.input_channels
    bounds: dict[str, Interval] = {
        program.input_name: (np.full(c, lo0, dtype=object), np.full(c, hi0, dtype=object))
    }
    accs: dict[str, int] = {}
    roots: dict[str, int] = {}
    _largest[0] = max(abs(lo0), abs(hi0))
    for op in program.operations:
        x = bounds[op.inputs[0]]
        if op.op == "channel_affine":
            plo, phi = _ext(x[0], x[1], _obj(op.params["scale"]), _obj(op.params["scale"]))
            _check(op, "product x*scale", plo, phi)
            off = _obj(op.params["offset"])
            out = (plo + off, phi + off)
        elif op.op in ("conv2d", "conv_transpose2d"):
            out, acc = _conv(op, x)
            accs[op.name] = acc
        elif op.op == "requantize":
            m = _obj(op.params["multiplier"])
            plo, phi = _ext(x[0], x[1], m, m)
            _check(op, "product x*multiplier", plo, phi)
            s = _obj(op.params["shift"])
            half = np.array([(1 << (int(v) - 1)) if v else 0 for v in s], dtype=object)
            _check(op, "x*multiplier plus the rounding half", plo, phi + half)
            out = _clamp(op, _round_shift(plo, s), _round_shift(phi, s))
        elif op.op == "igdn":
            out, roots[op.name] = _igdn(op, x)
        elif op.op in ("add", "mul"):
            y = bounds[op.inputs[1]]
            out = (x[0] + y[0], x[1] + y[1]) if op.op == "add" else _ext(x[0], x[1], y[0], y[1])
        else:  # pragma: no cover - program.py admits only the ops above
            raise WaiOpsError(f"{op.name}: no bound for {op.op}")
        _check(op, "output", out[0], out[1])
        bounds[op.output] = out
    if rgb8_output:
        lo, hi = bounds[program.output_name]
        if int(np.min(lo)) < 0 or int(np.max(hi)) > 255:
            raise BoundExceeded(
                f"output {program.output_name!r} is proven only within "
                f"[{int(np.min(lo))}, {int(np.max(hi))}], not inside the RGB8 range [0, 255]"
            )
    frozen = {
        k: (np.asarray(v[0], dtype=np.int64), np.asarray(v[1], dtype=np.int64))
        for k, v in bounds.items()
    }
    return dataclasses.replace(
        program, bounds=frozen, accumulators=accs, largest=_largest[0], roots_products=roots
    )


def _clamp(op: Operation, lo: np.ndarray, hi: np.ndarray) -> Interval:
    c_lo, c_hi = op.attrs["clamp"]
    return (np.minimum(np.maximum(lo, c_lo), c_hi), np.minimum(np.maximum(hi, c_lo), c_hi))


def _conv(op: Operation, x: Interval) -> tuple[Interval, int]:
    """The accumulator bound: per output channel, the sums of every tap's most negative and
    most positive term (0 included: taps past a border add nothing), over the taps that can
    meet one output position — for a strided transposed convolution, the worst phase."""
    w = op.params["weight"]  # int64, |w| < 2^15
    if op.op == "conv_transpose2d":
        w = w.transpose(1, 0, 2, 3)  # [Co, Ci, k, k]
    xlo = np.asarray(x[0], dtype=np.int64)[None, :, None, None]
    xhi = np.asarray(x[1], dtype=np.int64)[None, :, None, None]
    # |w| < 2^15 and |x| < 2^31: every term < 2^46. A term past 2^32 breaks the rule by itself,
    # so terms are clipped there (the sums still break it) and at most 2^18 of them sum in int64.
    cap = 1 << 32
    t_max = np.minimum(np.maximum(np.maximum(w * xlo, w * xhi), 0), cap)
    t_min = np.maximum(np.minimum(np.minimum(w * xlo, w * xhi), 0), -cap)
    s = op.attrs.get("stride", 1) if op.op == "conv_transpose2d" else 1
    k = op.attrs["kernel"]
    pos = np.full(w.shape[0], np.iinfo(np.int64).min, dtype=np.int64)
    neg = np.full(w.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
    for ry in range(min(s, k)):
        for rx in range(min(s, k)):
            pos = np.maximum(pos, t_max[:, :, ry::s, rx::s].sum(axis=(1, 2, 3)))
            neg = np.minimum(neg, t_min[:, :, ry::s, rx::s].sum(axis=(1, 2, 3)))
    b = _obj(op.params["bias"])
    pos_o, neg_o = _obj(pos), _obj(neg)
    zero = np.zeros_like(b)
    acc_lo = np.minimum(zero, b) + neg_o
    acc_hi = np.maximum(zero, b) + pos_o
    _check(op, "accumulator", acc_lo, acc_hi)
    acc = max(abs(int(np.min(acc_lo))), int(np.max(acc_hi)))
    return (b + neg_o, b + pos_o), acc


def _igdn(op: Operation, x: Interval) -> tuple[Interval, int]:
    """The output interval, and the largest ``|x · r|`` (step 4's product)."""
    p = op.attrs["square_shift"]
    lo, hi = x
    big = np.maximum(np.abs(lo), np.abs(hi))
    small = np.where((lo <= 0) & (hi >= 0), 0, np.minimum(np.abs(lo), np.abs(hi)))
    sq_hi = big * big
    half = (1 << (p - 1)) if p else 0
    _check(op, "x*x plus the rounding half", sq_hi * 0, sq_hi + half)
    q_lo = _round_shift(small * small, np.array(p))
    q_hi = _round_shift(sq_hi, np.array(p))
    gamma = _obj(op.params["gamma"])
    beta = _obj(op.params["beta"])
    n_hi = beta + gamma.dot(q_hi)
    n_lo = beta + gamma.dot(q_lo)
    _check(op, "the sum beta + gamma*q", n_lo * 0, n_hi)
    r_lo, r_hi = _isqrt(n_lo), _isqrt(n_hi)
    plo, phi = _ext(lo, hi, r_lo, r_hi)
    s = _obj(op.params["shift"])
    halves = np.array([(1 << (int(v) - 1)) if v else 0 for v in s], dtype=object)
    _check(op, "x*r", plo, phi)
    _check(op, "x*r plus the rounding half", plo, phi + halves)
    largest = max(-int(np.min(plo)), int(np.max(phi)))
    return _clamp(op, _round_shift(plo, s), _round_shift(phi, s)), largest
