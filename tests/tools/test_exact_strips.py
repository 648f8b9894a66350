"""The exact convolutions on strips of output rows (tools/int_synth_exact.py, "Memory"): the
same bits as one whole convolution on the whole input's grid, whatever the strip height, and
the GDN in place the same bits as ``x / sqrt(norm(x · x))``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

torch = import_or_skip(lambda: __import__("torch"), "torch", reason="the tools extra (torch)")

from wai_dispatch.tools import int_synth_exact as exact  # noqa: E402

GEOMETRY = {"conv": (5, 2, 2), "conv3": (3, 1, 1), "pointwise": (1, 1, 0)}


def _whole(conv: Any, x: np.ndarray) -> np.ndarray:
    """The convolution as it ran before the strips: snap the whole input, one conv2d."""
    import torch.nn.functional as F

    for bits in range(conv.x_bits, -1, -1):
        x_int, x_frac = exact.snap(x, bits)
        frac = conv.w_frac + x_frac
        b_int = np.rint(np.ldexp(conv.bias, frac))
        if int(np.abs(x_int).max()) * conv.l1 + int(np.abs(b_int).max()) < 1 << 53:
            break
    _, s, p = GEOMETRY[conv.kind]
    acc = F.conv2d(torch.from_numpy(x_int), torch.from_numpy(conv.w_int), None, s, p).numpy()
    out: np.ndarray = np.ldexp(acc + b_int[None, :, None, None], -frac)
    return out


def _conv(kind: str, c_in: int, c_out: int, rng: np.random.Generator) -> Any:
    k = GEOMETRY[kind][0]
    weight = rng.normal(size=(c_out, c_in, k, k)) * 0.1
    if kind == "pointwise":  # GDN's γ and β: positive
        weight, bias = np.abs(weight), rng.uniform(0.5, 1.5, c_out)
    else:
        bias = rng.normal(size=c_out)
    return exact.ExactConv(weight.astype(np.float32), bias.astype(np.float32), kind)


@pytest.mark.parametrize("kind", ["conv", "conv3", "pointwise"])
@pytest.mark.parametrize("strip_bytes", [1, 4096, exact.STRIP_BYTES])
def test_strips_are_the_whole_convolution(
    kind: str, strip_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(30)
    c_in = 8 if kind == "pointwise" else 3
    conv = _conv(kind, c_in, 8 if kind == "pointwise" else 5, rng)
    x = rng.normal(size=(1, c_in, 37, 23)) * 3
    monkeypatch.setattr(exact, "STRIP_BYTES", strip_bytes)
    strips: list[tuple[int, int]] = []
    got = conv(x, on_strip=lambda done, total: strips.append((done, total)))
    assert got.tobytes() == _whole(conv, x).tobytes()
    out_h = got.shape[2]
    assert strips[-1][0] == strips[-1][1] == len(strips)
    if strip_bytes == 1:  # one output row per strip: the im2col bounded by one row's columns
        assert len(strips) == out_h
    squared = conv(x, square=True) if kind == "pointwise" else None
    if squared is not None:
        assert squared.tobytes() == _whole(conv, x * x).tobytes()


def test_gdn_in_place_is_the_gdn(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(31)
    norm = _conv("pointwise", 6, 6, rng)
    x = rng.normal(size=(1, 6, 19, 11))
    want = x / np.sqrt(_whole(norm, x * x))
    monkeypatch.setattr(exact, "STRIP_BYTES", 1)
    norm.divide(x)
    assert x.tobytes() == want.tobytes()
    with pytest.raises(ValueError):
        _conv("conv3", 6, 6, rng).divide(x)


def test_an_input_of_zeros_snaps_to_positive_zeros() -> None:
    conv = _conv("conv3", 2, 3, np.random.default_rng(32))
    x = -np.zeros((1, 2, 5, 4))
    assert conv(x).tobytes() == _whole(conv, x).tobytes()


def test_steps_report_each_stage_and_strip() -> None:
    seen: list[tuple[int, int, str]] = []
    steps = exact.Steps(lambda done, total, note: seen.append((done, total, note)), 3)
    strip = steps.stage("a")
    assert strip is not None
    strip(1, 2)
    steps.stage("b")
    assert seen == [(0, 3, "a"), (0, 3, "a, strip 1/2"), (1, 3, "b")]
    assert exact.Steps(None, 3).stage("a") is None
