"""The fast engines of wai-ops/1 against the int64 reference, bit for bit, on property-generated
programs and inputs at the edges of the bound rule (extreme weights and inputs, rounding ties,
negatives); the reference against an independent oracle (torch's transposed convolution in
float64, exact for these magnitudes); isqrt and round_shift on their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from waiops_programs import every_op

from wai_dispatch.paths.waiops import reference
from wai_dispatch.paths.waiops.build import ProgramBuilder
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.errors import BoundExceeded, InputShapeOverLimits
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.onnx_engine import OnnxEngine
from wai_dispatch.paths.waiops.program import Program


def test_round_shift_ties_go_up_and_isqrt_is_the_floor() -> None:
    v = np.array([5, -5, 6, -6, 7, -7, 2, -2, -3, 3], dtype=np.int64)
    assert reference.round_shift(v, 1).tolist() == [3, -2, 3, -3, 4, -3, 1, -1, -1, 2]
    assert reference.round_shift(v, 0).tolist() == v.tolist()
    n = np.concatenate([np.arange(0, 70000), np.array([2**31 - 1, 2**31 - 2, 46340**2 - 1])])
    expected = np.array([math.isqrt(int(k)) for k in n])
    assert np.array_equal(reference.isqrt(n.astype(np.int64)), expected)


def _edge_program(data: st.DataObject, limit: int) -> tuple[Program, np.ndarray]:
    """A convolution (transposed or not) then requantize, weights and input range chosen so the
    accumulator bound lands just under ``limit``; the input drawn from the range's ends."""
    ci, co = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    transposed = data.draw(st.booleans())
    k = data.draw(st.integers(1, 5))
    s = data.draw(st.integers(1, 2)) if transposed else 1
    p = data.draw(st.integers(0, k - 1))
    if not transposed and k % 2 == 0:
        k += 1
        p = min(p, k - 1)
    q = data.draw(st.integers(0, s - 1))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    wmax = data.draw(st.sampled_from([1, 127, 32767]))
    shape = (ci, co, k, k) if transposed else (co, ci, k, k)
    w = rng.choice(np.array([-wmax, wmax, 0, -1, 1]), size=shape).astype(np.int64)
    taps = max(1, int(np.abs(w).sum()))
    r = max(1, (limit - 2**12) // taps)
    lo = -r if data.draw(st.booleans()) else -(r // 3)
    bias = rng.integers(-1024, 1024, co)
    b = ProgramBuilder("x", ci, (int(lo), int(r)))
    attrs = {"kernel": k, "padding": p}
    if transposed:
        attrs.update(stride=s, output_padding=q)
    b.add(
        "conv_transpose2d" if transposed else "conv2d",
        "conv",
        ["x"],
        "a",
        attrs,
        {"weight": w.astype(np.int16), "bias": bias.astype(np.int32)},
    )
    shift = rng.integers(0, 12, co)
    b.add(
        "requantize",
        "rq",
        ["a"],
        "y",
        {"clamp": [-(2**30), 2**30]},
        {"multiplier": np.ones(co, np.int32), "shift": shift.astype(np.int32)},
    )
    try:
        program = load_program(b.program_json("y", co), b.weights())
    except BoundExceeded:
        assume(False)
        raise
    h, wd = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    x = rng.choice(np.array([lo, r, 0, lo + 1, r - 1]), size=(1, ci, h, wd)).astype(np.int32)
    return program, x


def _reference(program: Program, x: np.ndarray) -> np.ndarray:
    try:
        return reference.run(program, x)
    except InputShapeOverLimits:  # a convolution that shrinks this input to nothing
        assume(False)
        raise


@given(st.data())
def test_float64_engine_equals_the_reference_at_the_int32_edge(data: st.DataObject) -> None:
    program, x = _edge_program(data, 2**31 - 1)
    ref = _reference(program, x)
    assert np.array_equal(Engine(program).run(x), ref)


@given(st.data())
def test_float32_onnx_engine_equals_the_reference_at_the_2_24_edge(data: st.DataObject) -> None:
    program, x = _edge_program(data, 2**24 - 1)
    assume(program.float32_exact)
    ref = _reference(program, x)
    assert np.array_equal(OnnxEngine(program).run(x), ref)


@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 5))
def test_both_engines_equal_the_reference_on_every_op(seed: int, h: int, w: int) -> None:
    rng = np.random.default_rng(seed)
    b = every_op(rng=rng)
    program = load_program(b.program_json("o", 3), b.weights())
    x = rng.integers(-20, 21, (1, 3, h, w)).astype(np.int32)
    ref = reference.run(program, x)
    assert np.array_equal(Engine(program).run(x), ref)
    assert program.float32_exact
    assert np.array_equal(OnnxEngine(program).run(x), ref)


def test_requantize_ties_and_negatives_in_every_engine() -> None:
    shifts = np.array([1, 2, 5, 0], np.int32)
    b = ProgramBuilder("x", 4, (-(2**20), 2**20))
    b.add(
        "requantize",
        "rq",
        ["x"],
        "y",
        {"clamp": [-(2**20), 2**20]},
        {"multiplier": np.ones(4, np.int32), "shift": shifts},
    )
    program = load_program(b.program_json("y", 4), b.weights())
    ks = np.arange(-6, 7)
    x = np.stack([ks * (1 << int(s)) + ((1 << int(s)) >> 1) for s in shifts])
    x = x[None, :, None, :].astype(np.int32)  # every value an exact tie (x.5 after the shift)
    ref = reference.run(program, x)
    expected = np.stack([np.floor(x[0, c, 0] / 2.0**s + 0.5) for c, s in enumerate(shifts)])
    assert np.array_equal(ref[0, :, 0], expected.astype(np.int32))
    assert np.array_equal(Engine(program).run(x), ref)
    assert np.array_equal(OnnxEngine(program).run(x), ref)


def test_reference_transposed_convolution_is_torchs() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.integers(-500, 500, (3, 5, 7))
    w = rng.integers(-32767, 32767, (3, 4, 5, 5))
    b = rng.integers(-1000, 1000, 4)
    got = reference.conv_transpose2d(x, w, b, 5, 2, 2, 1)
    want = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(x[None].astype(np.float64)),
        torch.from_numpy(w.astype(np.float64)),
        torch.from_numpy(b.astype(np.float64)),
        stride=2,
        padding=2,
        output_padding=1,
    )[0].numpy()
    assert np.array_equal(got, want.astype(np.int64))
    got = reference.conv2d(x, w.transpose(1, 0, 2, 3), b, 5, 2)
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x[None].astype(np.float64)),
        torch.from_numpy(w.transpose(1, 0, 2, 3).astype(np.float64)),
        torch.from_numpy(b.astype(np.float64)),
        padding=2,
    )[0].numpy()
    assert np.array_equal(got, want.astype(np.int64))


def test_onnx_runtimes_floor_sqrt_is_the_floor_square_root_below_2_24() -> None:
    """Every n below 2^24: what the float32 engine's Floor(Sqrt(n)) relies on (docs/wai-ops.md);
    the engine's own start-up check covers the squares and their predecessors."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from wai_dispatch.paths.onnx import shared_session_options
    from wai_dispatch.paths.waiops.onnx_engine import check_sqrt

    check_sqrt()
    graph = helper.make_graph(
        [helper.make_node("Sqrt", ["n"], ["s"]), helper.make_node("Floor", ["s"], ["r"])],
        "g",
        [helper.make_tensor_value_info("n", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort.InferenceSession(
        model.SerializeToString(), shared_session_options(), providers=["CPUExecutionProvider"]
    )
    for start in range(0, 1 << 24, 1 << 22):
        n = np.arange(start, start + (1 << 22), dtype=np.int64)
        (got,) = session.run(None, {"n": n.astype(np.float32)})
        assert np.array_equal(got.astype(np.int64), reference.isqrt(n)), start
