"""The integer arithmetic of the int8 graph engine (:mod:`paths.waiops.int8_graph`): weights
as uint8 digits with a zero point, activations as balanced int8 planes, and the bound that
proves their recombination inside int32 (docs/wai-ops.md, "The int8 graph engine")."""

from __future__ import annotations

import numpy as np


def weight_digits(w: np.ndarray) -> tuple[int, list[np.ndarray]]:
    """``w = Σ_i 256^i · d_i`` with every digit in ``[−z, 255 − z]``: the zero point ``z``
    (128 or 127, whichever needs fewer digits) and the digits (int64)."""
    best: tuple[int, list[np.ndarray]] | None = None
    for z in (128, 127):
        rest = np.asarray(w, dtype=np.int64)
        digits = []
        while True:
            d = (rest + z) % 256 - z
            digits.append(d)
            rest = (rest - d) // 256
            if not rest.any():
                break
        if best is None or len(digits) < len(best[1]):
            best = (z, digits)
    assert best is not None
    return best


def plane_ranges(lo: int, hi: int, bits: int = 7) -> list[tuple[int, int]]:
    """The interval of each balanced plane (base ``2^bits``, half ``2^(bits−1)``) of every
    ``x`` in ``[lo, hi]``, 0 included (the padding): ``[−half, half − 1]`` for each but the
    last, which is whatever is left once it lies within ``[−half, min(half, 127)]``."""
    half = 1 << (bits - 1)
    lo, hi = min(lo, 0), max(hi, 0)
    out: list[tuple[int, int]] = []
    while lo < -half or hi > min(half, 127):
        out.append((-half, half - 1))
        lo, hi = (lo + half) >> bits, (hi + half) >> bits
    out.append((lo, hi))
    return out


def _ext_sum(w: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel, the sums of the most negative and most positive terms ``w · p`` over
    ``w`` [Co, K] for ``p`` in ``[lo, hi]`` (0 included)."""
    a, b = w * lo, w * hi
    return np.minimum(np.minimum(a, b), 0).sum(axis=1), np.maximum(np.maximum(a, b), 0).sum(axis=1)


def gemm_sums(planes: list[tuple[int, int]], k: int) -> tuple[int, int]:
    """What MLAS's u8×s8 kernels sum before the int32 accumulator, at most, for uint8 weight
    digits ``b + z ≤ 255`` over ``k`` terms of planes in ``planes``: a pair of products (AVX2's
    ``vpmaddubsw`` adds two into int16, saturating: it must stay within 32,767) and a GEMM's
    raw partial sum ``Σ (b + z) · p`` (within int32)."""
    top = max(max(-lo, hi) for lo, hi in planes)
    return 2 * 255 * top, 255 * top * k


def recombination_bound(
    digits: list[np.ndarray], planes: list[tuple[int, int]], bias: np.ndarray, bits: int
) -> int:
    """The largest magnitude any term ``256^d 128^j Y_dj``, any partial sum of them in any
    order (the bias with them or not), or any GEMM's raw partial sum can reach: each term's
    interval from the weights' digits ``[Co, K]`` and the planes' intervals; a subset's sum
    lies between the sum of every term's negative end and the sum of every positive end."""
    neg = np.minimum(bias, 0).astype(object)
    pos = np.maximum(bias, 0).astype(object)
    worst = 0
    for d, dig in enumerate(digits):
        worst = max(worst, gemm_sums(planes, dig.shape[1])[1])  # MLAS's raw sums
        for j, (plo, phi) in enumerate(planes):
            lo, hi = _ext_sum(dig, plo, phi)
            c = 256**d * (1 << (bits * j))
            neg = neg + lo.astype(object) * c
            pos = pos + hi.astype(object) * c
    return int(max(worst, max(-int(np.min(neg)), int(np.max(pos)))))
