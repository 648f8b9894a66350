"""Small ``wai-ops/1`` programs for the tests: one of every operation, and builders that put
weights and input ranges at the edge of the bound rule."""

from __future__ import annotations

import numpy as np

from wai_dispatch.paths.waiops.build import ProgramBuilder


def every_op(c: int = 3, rng: np.random.Generator | None = None) -> ProgramBuilder:
    """Every operation of wai-ops/1 once, an RGB8 output, every bound below 2^24."""
    rng = rng or np.random.default_rng(0)
    b = ProgramBuilder("s", c, (-20, 20))
    b.add(
        "channel_affine",
        "aff",
        ["s"],
        "t",
        params={
            "scale": np.full(c, 16, np.int32),
            "offset": rng.integers(-8, 8, c).astype(np.int32),
        },
    )
    b.add(
        "conv_transpose2d",
        "d1",
        ["t"],
        "a1",
        {"kernel": 5, "stride": 2, "padding": 2, "output_padding": 1},
        {
            "weight": rng.integers(-300, 300, (c, 4, 5, 5)).astype(np.int16),
            "bias": rng.integers(-1000, 1000, 4).astype(np.int32),
        },
    )
    b.add(
        "requantize",
        "r1",
        ["a1"],
        "x1",
        {"clamp": [-2047, 2047]},
        {"multiplier": np.array([1, 2, 3, 1], np.int32), "shift": np.array([8, 9, 0, 7], np.int32)},
    )
    b.add(
        "igdn",
        "g1",
        ["x1"],
        "y1",
        {"square_shift": 6, "clamp": [-2047, 2047]},
        {
            "gamma": rng.integers(0, 20, (4, 4)).astype(np.int32),
            "beta": rng.integers(1, 1000, 4).astype(np.int32),
            "shift": np.full(4, 4, np.int32),
        },
    )
    b.add("add", "sum", ["y1", "x1"], "z1")
    b.add("mul", "prod", ["z1", "x1"], "w1")
    b.add(
        "requantize",
        "r15",
        ["w1"],
        "v1",
        {"clamp": [-1000, 1000]},
        {"multiplier": np.ones(4, np.int32), "shift": np.full(4, 10, np.int32)},
    )
    b.add(
        "conv2d",
        "c2",
        ["v1"],
        "a2",
        {"kernel": 3, "padding": 1},
        {
            "weight": rng.integers(-100, 100, (3, 4, 3, 3)).astype(np.int8),
            "bias": np.zeros(3, np.int32),
        },
    )
    b.add(
        "requantize",
        "r2",
        ["a2"],
        "o",
        {"clamp": [0, 255]},
        {"multiplier": np.full(3, 3, np.int32), "shift": np.full(3, 10, np.int32)},
    )
    return b
