"""Post-training quantisation of the bmshj2018 synthesis into a ``wai-ops/1`` program
(docs/int-synth-set.md): per-channel activation scales from calibration, per output channel
weight scales as large as the bound rule allows, power-of-two requantisation, an integer inverse
GDN; a :class:`Profile` sets the bit widths (``default``, the bundled set's; ``int8-units``,
one int8 digit per weight and one 7-bit plane per convolution input past the first, for the int8
graph engine). Every value that feeds a rounding decision is correctly rounded float64, exact
``frexp``/``ldexp``, ``math.fsum`` or int64: the program is the same bits on every CPU."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from wai_dispatch.paths.waiops.build import ProgramBuilder

#: Activations between layers: 10-bit signed, [-511, 511] (docs/int-synth-set.md, "Bit widths").
ACT = 511
#: The latent enters as symbol·2^4 + round(median·2^4): medians to 1/32.
LATENT_FRAC = 4
#: The inverse GDN squares x (|x| ≤ 511, x² < 2^18) and keeps x² / 2^SQUARE_SHIFT: 0, x² whole
#: (0.017 dB on the held-out pictures against 0.014 with 4, and three operations fewer).
SQUARE_SHIFT = 0
#: Largest accumulator (and IGDN sum) the quantiser aims at: below 2^24 (16 777 216), so that
#: a float32 engine is exact for the whole program (docs/wai-ops.md), with room for rounding.
BUDGET = 16_000_000
WEIGHT_MAX = 32767  # int16 weights
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class Profile:
    """The bit widths of a quantisation: ``act``, the largest |value| of a convolution's input
    past the first (an inverse GDN's output); ``igdn_in``, of a deconvolution's output that an
    inverse GDN reads; ``weight_max``, of an integer weight; ``latent_frac``, the latent's
    fraction bits (the first convolution's input); ``clip``, where not None, the quantile of an
    inverse GDN's |output| (per channel and calibration crop, ``y{i}_q``) its scale maps to
    ``act``, larger values clipped, instead of the largest."""

    act: int = ACT
    igdn_in: int = ACT
    weight_max: int = WEIGHT_MAX
    latent_frac: int = LATENT_FRAC
    clip: float | None = None


#: ``default``: today's set (10-bit activations, int16 weights). ``int8-units``: weights within
#: one int8 digit (±127, either zero point) and every inverse GDN's output within one balanced
#: 7-bit plane (±64: a u8×s8 pair ≤ 2·255·64 < 2^15, exact on AVX2's saturating ``vpmaddubsw``,
#: docs/wai-ops.md), its scale from the 99.9th percentile; the IGDNs' inputs keep 10 bits and
#: the latent its 1/16 (two planes).
PROFILES = {"default": Profile(), "int8-units": Profile(act=64, weight_max=127, clip=0.999)}

#: The synthesis's transposed convolutions.
DECONV = {"kernel": 5, "stride": 2, "padding": 2, "output_padding": 1}


def _l1(wi: np.ndarray, amax: np.ndarray, transposed: bool) -> np.ndarray:
    """Per output channel, the largest Σ|w·x| over the taps meeting one output position."""
    t = np.abs(wi) * (amax[:, None, None, None] if transposed else amax[None, :, None, None])
    if not transposed:
        return _fsum(t.reshape(t.shape[0], -1))
    co = t.shape[1]
    worst = np.zeros(co)
    for ry in range(2):
        for rx in range(2):
            phase = t[:, :, ry::2, rx::2].transpose(1, 0, 2, 3).reshape(co, -1)
            worst = np.maximum(worst, _fsum(phase))
    return worst


def _acc_hi(wq: np.ndarray, bq: np.ndarray, amax: np.ndarray, transposed: bool) -> np.ndarray:
    """The same bound on the integer weights, exactly (int64): the largest |partial sum|."""
    a = amax.astype(np.int64)
    t = np.abs(wq).astype(np.int64) * (
        a[:, None, None, None] if transposed else a[None, :, None, None]
    )
    if not transposed:
        total: np.ndarray = t.sum(axis=(1, 2, 3)) + np.abs(bq.astype(np.int64))
        return total
    worst = np.zeros(wq.shape[1], dtype=np.int64)
    for ry in range(2):
        for rx in range(2):
            worst = np.maximum(worst, t[:, :, ry::2, rx::2].sum(axis=(0, 2, 3)))
    return worst + np.abs(bq.astype(np.int64))


def _floor_log2(x: np.ndarray) -> np.ndarray:
    """``floor(log2(x))`` for x > 0, exact (``frexp``: x = m·2^e with 0.5 ≤ m < 1)."""
    exponents: np.ndarray = np.frexp(x)[1].astype(np.int64)
    return exponents - 1


def _pow2(e: np.ndarray) -> np.ndarray:
    """``2^e`` exactly (``ldexp``), float64."""
    return np.ldexp(np.ones(e.shape), e.astype(np.int64))


def _fsum(a: np.ndarray) -> np.ndarray:
    """Sums over the last axis, correctly rounded (``math.fsum``): independent of the order
    NumPy's SIMD loops would add in."""
    flat = a.reshape(-1, a.shape[-1])
    return np.array([math.fsum(row) for row in flat.tolist()], dtype=np.float64).reshape(
        a.shape[:-1]
    )


def _round_shift(v: int, s: int) -> int:
    return v if s == 0 else (v + (1 << (s - 1))) >> s


def latent_input(
    input_name: str,
    name: str,
    medians: np.ndarray,
    symbol_range: tuple[int, int],
    frac: int = LATENT_FRAC,
) -> tuple[ProgramBuilder, np.ndarray, np.ndarray]:
    """A program whose input, the symbols, enters as symbol·2^frac + round(median·2^frac)
    (``channel_affine`` ``name``, value ``t``); with that value's real scale and per-channel
    largest |value|."""
    c = int(medians.shape[0])
    lo_s, hi_s = symbol_range
    b = ProgramBuilder(input_name, c, (lo_s, hi_s))
    offset = np.rint(medians.astype(np.float64) * (1 << frac)).astype(np.int64)
    b.add(
        "channel_affine",
        name,
        [input_name],
        "t",
        params={
            "scale": np.full(c, 1 << frac, dtype=np.int32),
            "offset": offset.astype(np.int32),
        },
    )
    s_in = np.full(c, 1.0 / (1 << frac))
    amax = np.maximum(np.abs(lo_s * (1 << frac) + offset), np.abs(hi_s * (1 << frac) + offset))
    return b, s_in, amax


def conv_layer(
    b: ProgramBuilder,
    weights: Mapping[str, np.ndarray],
    layer: tuple[str, str, Mapping[str, int]],
    k: int,
    value: str,
    scales: tuple[np.ndarray, np.ndarray, np.ndarray],
    clamp: list[int],
    budget: float,
    coarsen: bool = False,
    weight_max: int = WEIGHT_MAX,
) -> tuple[str, np.ndarray, dict[str, object]]:
    """Layer ``(name, op, attrs)`` (``value`` → ``a{k}``) and its ``requantize`` (→ ``x{k}``),
    from ``scales`` (input, output, largest |input|, per channel): per output channel the largest
    weight scale, a power of two from the output's, that keeps every accumulator within
    ``budget`` and int32 and every weight within ``weight_max``; where no fraction bit is left
    and ``coarsen``, a twice coarser output scale. The output value, its scale, and what was
    chosen."""
    name, op, attrs = layer
    s_in, s_out, amax = scales
    w = weights[f"{name}.weight"].astype(np.float64)
    bias = weights[f"{name}.bias"].astype(np.float64)
    transposed = op == "conv_transpose2d"
    out_axis = 1 if transposed else 0
    in_shape, out_shape = [1, 1, 1, 1], [1, 1, 1, 1]
    in_shape[1 - out_axis] = out_shape[out_axis] = -1
    others = tuple(a for a in range(4) if a != out_axis)
    wi = w * s_in.reshape(in_shape)  # the real weight per unit of the integer input
    l1 = _l1(wi, amax, transposed) + np.abs(bias)
    k_max = np.minimum(
        budget / np.maximum(l1, 1e-30), weight_max / np.maximum(np.abs(wi).max(axis=others), 1e-30)
    )
    shift = np.clip(_floor_log2(k_max * s_out), 0, 30)
    while True:
        scale = _pow2(shift) / s_out
        wq = np.rint(wi * scale.reshape(out_shape))
        bq = np.rint(bias * scale)
        acc = _acc_hi(wq, bq, amax, transposed)
        half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
        over = (acc + half > INT32_MAX) | (np.abs(wq).max(axis=others) > weight_max)
        if not over.any():
            break
        if coarsen:
            s_out = np.where(over & (shift == 0), s_out * 2.0, s_out)
        shift = np.where(over & (shift > 0 if coarsen else True), shift - 1, shift)
    params = {"weight": wq.astype(np.int16), "bias": bq.astype(np.int32)}
    b.add(op, name, [value], f"a{k}", dict(attrs), params)
    requant = {"multiplier": np.ones(w.shape[out_axis], np.int32), "shift": shift.astype(np.int32)}
    value = b.add("requantize", f"{name}.requant", [f"a{k}"], f"x{k}", {"clamp": clamp}, requant)
    chosen: dict[str, object] = {
        "weight_bits": int(np.abs(wq).max()).bit_length() + 1,  # ceil(log2(max + 1)) + 1
        "shift": [int(shift.min()), int(shift.max())],
        "accumulator_max": int(acc.max()),
    }
    return value, s_out, chosen


def quantise(
    weights: Mapping[str, np.ndarray],
    stats: Mapping[str, np.ndarray],
    medians: np.ndarray,
    symbol_range: tuple[int, int],
    profile: Profile = PROFILES["default"],
) -> tuple[ProgramBuilder, dict[str, object]]:
    """The program and what was chosen per layer (shifts, weight bits) for the set's facts, at
    ``profile``'s bit widths.

    ``weights``: the float synthesis (``deconv{i}.weight`` [Ci, Co, 5, 5], ``.bias``,
    ``igdn{i}.gamma`` [C, C, 1, 1], ``igdn{i}.beta``); ``stats``: per-channel largest |value|
    of ``a{i}`` (deconv i's output) and ``y{i}`` (IGDN i's output) over the calibration set."""
    p = profile
    b, s_in, amax = latent_input("symbols", "latent", medians, symbol_range, p.latent_frac)
    value = "t"
    report: dict[str, object] = {}
    for i in range(1, 5):
        co = weights[f"deconv{i}.bias"].shape[0]
        if i < 4:
            s_out = np.maximum(stats[f"a{i}"].astype(np.float64), 1e-6) / p.igdn_in
            clamp = [-p.igdn_in, p.igdn_in]
        else:
            s_out = np.full(co, 1.0 / 255.0)
            clamp = [0, 255]
        layer = (f"deconv{i}", "conv_transpose2d", DECONV)
        scales = (s_in, s_out, amax)
        value, s_out, report[layer[0]] = conv_layer(
            b, weights, layer, i, value, scales, clamp, BUDGET, weight_max=p.weight_max
        )
        if i == 4:
            break
        acts = (p.igdn_in, p.act)
        value, s_in = _igdn(b, i, value, weights, stats, s_out, report, acts, p.clip)
        amax = np.full(co, p.act, dtype=np.int64)
    return b, report


def _igdn(
    b: ProgramBuilder,
    i: int,
    value: str,
    weights: Mapping[str, np.ndarray],
    stats: Mapping[str, np.ndarray],
    s_x: np.ndarray,
    report: dict[str, object],
    acts: tuple[int, int] = (ACT, ACT),
    clip: float | None = None,
) -> tuple[str, np.ndarray]:
    """``y = x·√(β + Σ γ x²)`` with x at scale ``s_x`` (per channel, |x| ≤ ``acts[0]``), y
    (|y| ≤ ``acts[1]``) at the calibrated scale (of the ``clip`` quantile, or the largest)
    rounded so that ``y = round_shift(x·isqrt(n), shift)`` holds (module doc)."""
    x_act, y_act = acts
    gamma = weights[f"igdn{i}.gamma"].astype(np.float64).reshape(s_x.size, s_x.size)
    beta = weights[f"igdn{i}.beta"].astype(np.float64)
    peak = stats[f"y{i}" if clip is None else f"y{i}_q"]
    s_y = np.maximum(peak.astype(np.float64), 1e-6) / y_act
    q_max = _round_shift(x_act * x_act, SQUARE_SHIFT)
    # n_real = β + Σ γ x²; with q ≈ x_int² / 2^p, x² = q · 2^p · s_x²; n_int = n_real · G.
    unit = gamma * (s_x * s_x)[None, :] * float(1 << SQUARE_SHIFT)  # per unit of q
    n_max_real = beta + _fsum(unit) * q_max
    g_max = BUDGET / n_max_real
    shift = np.clip(_floor_log2(np.sqrt(g_max) * s_y / s_x), 0, 30)
    while True:
        r = s_x * _pow2(shift) / s_y
        g = r * r
        gq = np.rint(unit * g[:, None]).astype(np.int64)
        bq = np.rint(beta * g).astype(np.int64)
        n_hi = bq + gq.sum(axis=1) * q_max
        over = n_hi > INT32_MAX
        if not over.any():
            break
        shift = np.where(over, shift - 1, shift)
    y = b.add(
        "igdn",
        f"igdn{i}",
        [value],
        f"y{i}",
        {"square_shift": SQUARE_SHIFT, "clamp": [-y_act, y_act]},
        {
            "gamma": gq.astype(np.int32),
            "beta": bq.astype(np.int32),
            "shift": shift.astype(np.int32),
        },
    )
    report[f"igdn{i}"] = {
        "shift": [int(shift.min()), int(shift.max())],
        "sum_max": int(n_hi.max()),
        "gamma_max": int(gq.max()),
    }
    # The output's real scale is exactly s_x·2^shift/√G = s_y up to G's rounding: take it exact.
    return y, s_x * _pow2(shift) / np.sqrt(g)
