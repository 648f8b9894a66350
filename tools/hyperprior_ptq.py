"""Post-training quantisation of the bmshj2018-hyperprior hyper-synthesis ``h_s`` into a
``wai-ops/1`` program (docs/bmshj2018-hyperprior-set.md): z's symbols in, the Gaussian scales out
as integers of 2^-SCALE_FRAC, so the scale-index table is one integer threshold per table scale.
Each ReLU is a ``requantize``'s clamp; interior activations are ACT-bounded with calibrated
per-channel scales. The arithmetic is that of tools/int_synth_ptq.py (same bits on every CPU);
a :class:`Profile` sets the bit widths (``default``, the bundled set's; ``int8-units``, one int8
digit per weight and one 7-bit plane per convolution input past the first, for the int8 graph
engine, as tools/int_synth_ptq.py's profile of the same name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from wai_dispatch.paths.waiops.build import ProgramBuilder
from wai_dispatch.tools import int_synth_ptq
from wai_dispatch.tools.int_synth_ptq import DECONV, conv_layer, latent_input

#: Interior activations: 13-bit unsigned after the ReLU, [0, 4095].
ACT = 4095
#: The program's output is the scale in units of 2^-SCALE_FRAC (1/256).
SCALE_FRAC = 8
#: Largest output: 65535/256 ≈ 256, CompressAI's largest table scale.
SCALE_MAX = 65535
#: Largest accumulator the quantiser aims at (the bound rule's limit is 2^31 - 1).
BUDGET = 1 << 30


@dataclass(frozen=True)
class Profile:
    """The bit widths of a quantisation of ``h_s``: ``act``, the largest value after each
    interior ReLU (the input of ``deconv2`` and ``conv3``); ``weight_max``, of an integer weight;
    ``budget``, the largest accumulator the quantiser aims at. The side latent enters at 1/16
    either way (medians to 1/32): at 1/1 their rounding alone costs 9% of the rate."""

    act: int = ACT
    weight_max: int = int_synth_ptq.WEIGHT_MAX
    budget: int = BUDGET


#: ``default``: today's set (13-bit activations, int16 weights, accumulators up to 2^30: the
#: pointwise steps need float64). ``int8-units``: weights within one int8 digit (±127) and
#: every ReLU's output within one balanced 7-bit plane (``[0, 64]``: a u8×s8 pair ≤ 2·255·64 <
#: 2^15, exact on AVX2's saturating ``vpmaddubsw``, docs/wai-ops.md), every accumulator below
#: int_synth_ptq's float32 budget, so the program is float32-exact; the side latent keeps its
#: two planes (``deconv1``, 7% of h_s's multiply-accumulates).
PROFILES = {
    "default": Profile(),
    "int8-units": Profile(act=64, weight_max=127, budget=int_synth_ptq.BUDGET),
}

#: (name, op, attrs) of h_s's three convolutions, in order.
LAYERS: tuple[tuple[str, str, dict[str, int]], ...] = (
    ("deconv1", "conv_transpose2d", DECONV),
    ("deconv2", "conv_transpose2d", DECONV),
    ("conv3", "conv2d", {"kernel": 3, "padding": 1}),
)


def quantise(
    weights: Mapping[str, np.ndarray],
    stats: Mapping[str, np.ndarray],
    medians: np.ndarray,
    symbol_range: tuple[int, int],
    profile: Profile = PROFILES["default"],
) -> tuple[ProgramBuilder, dict[str, object]]:
    """The program and what was chosen per layer, at ``profile``'s bit widths.

    ``weights``: ``deconv1``/``deconv2`` (``[Ci, Co, 5, 5]``) and ``conv3`` (``[Co, Ci, 3,
    3]``) ``.weight``/``.bias``, float; ``stats``: per-channel largest activation of ``a1`` and
    ``a2`` (after the ReLU) over the calibration set; ``medians``: the side latent's medians;
    ``symbol_range``: the program's declared input range."""
    b, s_in, amax = latent_input("z_symbols", "z_hat", medians, symbol_range)
    value = "t"
    report: dict[str, object] = {}
    for i, (name, op, attrs) in enumerate(LAYERS):
        co = weights[f"{name}.bias"].shape[0]
        if i == len(LAYERS) - 1:
            s_out = np.full(co, 1.0 / (1 << SCALE_FRAC))
            clamp = [0, SCALE_MAX]
        else:
            # A channel calibration never saw active gets the scale of 1/1024 of the layer's
            # largest, not a vanishing one (its weights would not fit otherwise).
            peak = stats[f"a{i + 1}"].astype(np.float64)
            s_out = np.maximum(peak, np.ldexp(float(peak.max()), -10)) / profile.act
            clamp = [0, profile.act]
        scales = (s_in, s_out, amax)
        value, s_out, report[name] = conv_layer(
            b,
            weights,
            (name, op, attrs),
            i + 1,
            value,
            scales,
            clamp,
            profile.budget,
            coarsen=True,
            weight_max=profile.weight_max,
        )
        s_in = s_out
        amax = np.full(co, clamp[1], dtype=np.int64)
    return b, report


def scale_thresholds(scale_table: Sequence[float]) -> list[int]:
    """The scale-index table: ``T_j = floor(s_j · 2^SCALE_FRAC)`` for every table scale but the
    last. CompressAI's ``build_indexes`` gives index ``#{j : scale > s_j}``; with the scale an
    integer ``q`` of 2^-SCALE_FRAC, ``q/2^f > s_j`` holds exactly when ``q > T_j``."""
    return [int(np.floor(np.ldexp(np.float64(s), SCALE_FRAC))) for s in list(scale_table)[:-1]]


def scale_indexes(q: np.ndarray, thresholds: Sequence[int]) -> np.ndarray:
    """Each integer scale's table index: how many thresholds lie below it (int32)."""
    t = np.asarray(thresholds, dtype=np.int64)
    out: np.ndarray = np.searchsorted(t, q.astype(np.int64), side="left").astype(np.int32)
    return out
