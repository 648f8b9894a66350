"""Every WGSL kernel gives the ``wai-ops/1`` reference interpreter's output bit for bit, on
property-generated programs and inputs at the edges of the bound rule (extreme values,
rounding ties, negatives), on whatever WebGPU adapter this machine has (Mesa's lavapipe in CI),
whole and tiled into row bands."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("wgpu", reason="wgpu (wgpu-py) is not installed: pip install wgpu")

from wai_dispatch.paths.waiops import reference
from wai_dispatch.paths.waiops.build import ProgramBuilder
from wai_dispatch.paths.waiops.errors import BoundExceeded
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.wgsl.execute import run_program
from wai_dispatch.paths.wgsl.runner import Runner

I32 = (1 << 31) - 1
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def runner(wgpu_device: Runner) -> Runner:
    return wgpu_device  # tests/paths/conftest.py


def edgy(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Integers in [lo, hi], the ends and zero often."""
    inner = [st.just(lo), st.just(hi), st.integers(lo, hi)]
    if lo <= 0 <= hi:
        inner.append(st.just(0))
    return st.one_of(*inner)


def arrays(data: st.DataObject, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    n = int(np.prod(shape))
    values = data.draw(st.lists(edgy(lo, hi), min_size=n, max_size=n))
    return np.array(values, dtype=np.int64).reshape(shape)


def check(runner: Runner, b: ProgramBuilder, out: str, channels: int, x: np.ndarray) -> None:
    try:
        program = load_program(b.program_json(out, channels), b.weights())
    except BoundExceeded:  # the strategy aims inside the bound rule; the loader is the judge
        assume(False)
        raise
    want = reference.run(program, x)
    got = run_program(runner, program, x)
    assert got.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def latent(data: st.DataObject, c: int, xmax: int, hw: tuple[int, int] | None = None) -> Any:
    h, w = hw or (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)))
    return arrays(data, (1, c, h, w), -xmax, xmax).astype(np.int32)


def clamp(data: st.DataObject) -> list[int]:
    a, b = data.draw(edgy(-I32 - 1, I32)), data.draw(edgy(-I32 - 1, I32))
    return [min(a, b), max(a, b)]


@SETTINGS
@given(data=st.data())
def test_requantize(runner: Runner, data: st.DataObject) -> None:
    c = data.draw(st.integers(1, 3))
    xmax = data.draw(st.one_of(st.sampled_from([1, 5, 1 << 15, 1 << 30, I32]), st.integers(1, I32)))
    shift = arrays(data, (c,), 0, 30)
    mmax = [(I32 - ((1 << int(s - 1)) if s else 0)) // xmax for s in shift]
    mult = np.array(
        [data.draw(st.one_of(edgy(0, m), st.just(min(1, m)))) for m in mmax], dtype=np.int64
    )
    b = ProgramBuilder("x", c, (-xmax, xmax))
    params = {"multiplier": mult.astype(np.int32), "shift": shift.astype(np.int32)}
    b.add("requantize", "rq", ["x"], "y", {"clamp": clamp(data)}, params)
    x = latent(data, c, xmax)
    s0 = int(shift[0])
    if s0:  # ties of channel 0 (exact halves when its multiplier is 1), negative ones too
        ties = (np.arange(-3, 3) << s0) + (1 << (s0 - 1))
        ties = ties[(ties >= -xmax) & (ties <= xmax)]
        x[0, 0, 0, : min(len(ties), x.shape[3])] = ties[: x.shape[3]]
    check(runner, b, "y", c, x)


@pytest.mark.parametrize("s", [1, 2, 5, 17, 30])
def test_requantize_rounds_ties_toward_plus_infinity(runner: Runner, s: int) -> None:
    """``round_shift``: −2.5 → −2, −3.5 → −3, 2.5 → 3 (docs/wai-ops.md), at every shift;
    pinned values, and the interpreter's."""
    half, step = 1 << (s - 1), 1 << s
    ks = np.arange(-4, 4, dtype=np.int64)
    x = np.concatenate([ks * step + half, ks * step - half, ks * step]).clip(
        -I32 - 1 + half, I32 - half
    )
    b = ProgramBuilder("x", 1, (int(x.min()), int(x.max())))
    params = {"multiplier": np.array([1], np.int32), "shift": np.array([s], np.int32)}
    b.add("requantize", "rq", ["x"], "y", {"clamp": [-I32 - 1, I32]}, params)
    program = load_program(b.program_json("y", 1), b.weights())
    xs = x.reshape(1, 1, 1, -1).astype(np.int32)
    got = run_program(runner, program, xs).ravel()
    exact = x / step
    assert np.array_equal(got, np.floor(exact + 0.5).astype(np.int64))  # ties up, also < 0
    np.testing.assert_array_equal(got, reference.run(program, xs).ravel())
    if s == 1:
        pinned = dict(zip(x.tolist(), got.tolist(), strict=True))
        assert (pinned[-5], pinned[-7], pinned[5]) == (-2, -3, 3)


@SETTINGS
@given(data=st.data())
def test_channel_affine(runner: Runner, data: st.DataObject) -> None:
    c = data.draw(st.integers(1, 3))
    xmax = data.draw(st.one_of(st.sampled_from([1, 40, 1 << 20]), st.integers(1, 1 << 24)))
    offset = arrays(data, (c,), -(1 << 30), 1 << 30)
    scale = np.array(
        [
            data.draw(edgy(-((I32 - abs(int(o))) // xmax), (I32 - abs(int(o))) // xmax))
            for o in offset
        ]
    )
    b = ProgramBuilder("x", c, (-xmax, xmax))
    params = {"scale": scale.astype(np.int32), "offset": offset.astype(np.int32)}
    b.add("channel_affine", "aff", ["x"], "y", None, params)
    check(runner, b, "y", c, latent(data, c, xmax))


@SETTINGS
@given(data=st.data(), op=st.sampled_from(["add", "mul"]))
def test_add_and_mul(runner: Runner, data: st.DataObject, op: str) -> None:
    c = data.draw(st.integers(1, 3))
    xmax = data.draw(st.sampled_from([1, 3, 1 << 15, 46340]))
    scale = arrays(data, (c,), -1, 1)
    b = ProgramBuilder("x", c, (-xmax, xmax))
    zero = np.zeros(c, np.int32)
    b.add(
        "channel_affine", "neg", ["x"], "y", None, {"scale": scale.astype(np.int32), "offset": zero}
    )
    b.add(op, op, ["x", "y"], "z")
    check(runner, b, "z", c, latent(data, c, xmax))


@SETTINGS
@given(data=st.data())
def test_igdn(runner: Runner, data: st.DataObject) -> None:
    c = data.draw(st.integers(1, 3))
    xmax = data.draw(st.one_of(st.sampled_from([1, 255, 2047, 1 << 15]), st.integers(1, 1 << 15)))
    p = data.draw(edgy(0, 30))
    qmax = max(1, (xmax * xmax + ((1 << (p - 1)) if p else 0)) >> p)
    beta = arrays(data, (c,), 0, 1 << 30)
    gmax = (I32 - int(beta.max())) // (c * qmax)
    gamma = arrays(data, (c, c), 0, gmax)
    shift = arrays(data, (c,), 0, 29)
    b = ProgramBuilder("x", c, (-xmax, xmax))
    params = {
        "gamma": gamma.astype(np.int32),
        "beta": beta.astype(np.int32),
        "shift": shift.astype(np.int32),
    }
    b.add("igdn", "g", ["x"], "y", {"square_shift": p, "clamp": clamp(data)}, params)
    check(runner, b, "y", c, latent(data, c, xmax))


def conv_params(data: st.DataObject, shape: tuple[int, ...], co: int) -> tuple[Any, Any, int]:
    dtype = data.draw(st.sampled_from([np.int8, np.int16]))
    info = np.iinfo(dtype)
    weight = arrays(data, shape, int(info.min), int(info.max)).astype(dtype)
    bias = arrays(data, (co,), -(1 << 30), 1 << 30)
    taps = int(np.prod(shape)) // co
    wmax = max(1, int(np.abs(weight.astype(np.int64)).max()))
    xmax = max(1, min(1 << 20, (I32 - int(np.abs(bias).max())) // (taps * wmax)))
    return weight, bias.astype(np.int32), xmax


@SETTINGS
@given(data=st.data())
def test_conv2d(runner: Runner, data: st.DataObject) -> None:
    ci, co = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    k = data.draw(st.sampled_from([1, 3, 5]))
    p = data.draw(st.integers(0, k - 1))
    h, w = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    assume(h + 2 * p - k + 1 >= 1 and w + 2 * p - k + 1 >= 1)
    weight, bias, xmax = conv_params(data, (co, ci, k, k), co)
    b = ProgramBuilder("x", ci, (-xmax, xmax))
    b.add("conv2d", "c", ["x"], "y", {"kernel": k, "padding": p}, {"weight": weight, "bias": bias})
    check(runner, b, "y", co, latent(data, ci, xmax, (h, w)))


@SETTINGS
@given(data=st.data())
def test_conv_transpose2d(runner: Runner, data: st.DataObject) -> None:
    ci, co = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    k, s = data.draw(st.integers(1, 5)), data.draw(st.sampled_from([1, 2, 2]))
    p, q = data.draw(st.integers(0, k - 1)), data.draw(st.integers(0, s - 1))
    h, w = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    assume((h - 1) * s - 2 * p + k + q >= 1 and (w - 1) * s - 2 * p + k + q >= 1)
    weight, bias, xmax = conv_params(data, (ci, co, k, k), co)
    b = ProgramBuilder("x", ci, (-xmax, xmax))
    attrs = {"kernel": k, "stride": s, "padding": p, "output_padding": q}
    b.add("conv_transpose2d", "d", ["x"], "y", attrs, {"weight": weight, "bias": bias})
    check(runner, b, "y", co, latent(data, ci, xmax, (h, w)))


def synthesis_like(rng: np.random.Generator) -> Any:
    """A small synthesis: deconv k5 s2 → requantize → igdn → conv 3x3 → add → mul."""
    b = ProgramBuilder("x", 4, (-40, 40))
    b.add(
        "conv_transpose2d",
        "d1",
        ["x"],
        "a1",
        {"kernel": 5, "stride": 2, "padding": 2, "output_padding": 1},
        {
            "weight": rng.integers(-128, 128, (4, 6, 5, 5)).astype(np.int8),
            "bias": rng.integers(-999, 999, 6).astype(np.int32),
        },
    )
    b.add(
        "requantize",
        "r1",
        ["a1"],
        "x1",
        {"clamp": [-2047, 2047]},
        {
            "multiplier": rng.integers(0, 3000, 6).astype(np.int32),
            "shift": rng.integers(0, 12, 6).astype(np.int32),
        },
    )
    b.add(
        "igdn",
        "g1",
        ["x1"],
        "y1",
        {"square_shift": 6, "clamp": [-2047, 2047]},
        {
            "gamma": rng.integers(0, 99, (6, 6)).astype(np.int32),
            "beta": rng.integers(0, 999, 6).astype(np.int32),
            "shift": rng.integers(0, 10, 6).astype(np.int32),
        },
    )
    b.add(
        "conv2d",
        "c1",
        ["y1"],
        "z",
        {"kernel": 3, "padding": 1},
        {
            "weight": rng.integers(-50, 50, (6, 6, 3, 3)).astype(np.int16),
            "bias": rng.integers(-99, 99, 6).astype(np.int32),
        },
    )
    b.add("add", "ad", ["z", "y1"], "s")
    b.add("mul", "mu", ["y1", "x1"], "m")
    b.add(
        "conv2d",
        "c2",
        ["m"],
        "out",
        {"kernel": 1, "padding": 0},
        {
            "weight": rng.integers(-3, 3, (3, 6, 1, 1)).astype(np.int8),
            "bias": np.zeros(3, np.int32),
        },
    )
    b.add("add", "final", ["out", "out"], "rgb")
    return load_program(b.program_json("rgb", 3), b.weights())


def test_a_program_tiled_into_row_bands_gives_the_same_bits(runner: Runner) -> None:
    rng = np.random.default_rng(10)
    program = synthesis_like(rng)
    x = rng.integers(-40, 41, (1, 4, 9, 11)).astype(np.int32)
    want = reference.run(program, x)
    np.testing.assert_array_equal(run_program(runner, program, x), want)
    for limit in (1200, 2500, 4000):  # bands of a few rows; the weights still fit
        small = {**runner.limits, "maxStorageBufferBindingSize": 6 * 6 * 9 * 4 + limit}
        np.testing.assert_array_equal(run_program(runner, program, x, limits=small), want)
    few = {**runner.limits, "maxComputeWorkgroupsPerDimension": 3}
    np.testing.assert_array_equal(run_program(runner, program, x, limits=few), want)


def test_weight_buffers_are_cached_per_operation(runner: Runner) -> None:
    rng = np.random.default_rng(11)
    program = synthesis_like(rng)
    x = rng.integers(-40, 41, (1, 4, 3, 3)).astype(np.int32)
    constants: dict[tuple[str, str], Any] = {}
    first = run_program(runner, program, x, constants)
    held = dict(constants)
    assert ("d1", "weight") in held and ("g1", "gamma") in held
    second = run_program(runner, program, x, constants)
    assert constants == held and all(constants[k] is held[k] for k in held)
    np.testing.assert_array_equal(first, second)
