"""wai-ops/1 programs (docs/wai-ops.md): the format is validated whole, every bad program and
input is refused with its stable code, and the bound rule is sound (no value of the reference
ever leaves the interval the rule proved) and refuses what breaks it, naming the operation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from waiops_programs import every_op

from wai_dispatch.paths.waiops import reference
from wai_dispatch.paths.waiops.build import ProgramBuilder
from wai_dispatch.paths.waiops.errors import (
    BoundExceeded,
    InputOutOfRange,
    InputShapeOverLimits,
    UnknownAttribute,
    UnknownOp,
    WaiOpsError,
    WeightsMismatch,
)
from wai_dispatch.paths.waiops.load import load_program


def _load(b: ProgramBuilder, out: str = "o", channels: int = 3, **kw: Any) -> Any:
    return load_program(b.program_json(out, channels), b.weights(), **kw)


def _edit(b: ProgramBuilder, change: Any) -> bytes:
    doc = json.loads(b.program_json("o", 3))
    change(doc)
    return json.dumps(doc).encode()


def test_every_op_loads_and_states_its_bounds() -> None:
    program = _load(every_op(), rgb8_output=True)
    assert program.operation_count == 9
    assert [op.op for op in program.operations][:4] == [
        "channel_affine",
        "conv_transpose2d",
        "requantize",
        "igdn",
    ]
    lo, hi = program.bounds["t"]
    assert int(lo.min()) >= -20 * 16 - 8 and int(hi.max()) <= 20 * 16 + 8
    assert set(program.accumulators) == {"d1", "c2"}


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (lambda d: d["operations"][1].update(op="deconv"), UnknownOp, "deconv"),
        (lambda d: d["operations"][1]["attrs"].update(dilation=2), UnknownAttribute, "dilation"),
        (lambda d: d["operations"][1]["attrs"].pop("stride"), UnknownAttribute, "stride"),
        (lambda d: d["operations"][3]["params"].pop("beta"), UnknownAttribute, "beta"),
        (lambda d: d.update(format="wai-ops/2"), WaiOpsError, "wai-ops/2"),
        (lambda d: d.update(extra=1), WaiOpsError, "extra"),
        (lambda d: d["operations"][1]["attrs"].update(stride=2.0), WaiOpsError, "stride"),
        (lambda d: d["operations"][1]["attrs"].update(stride=True), WaiOpsError, "stride"),
        (lambda d: d["operations"][1].update(inputs=["nowhere"]), WaiOpsError, "nowhere"),
        (lambda d: d["operations"][2].update(output="t"), WaiOpsError, "assigned twice"),
        (lambda d: d["output"].update(name="ghost"), WaiOpsError, "ghost"),
        (lambda d: d["input"].update(range=[5, 4]), WaiOpsError, "range"),
        (
            lambda d: d["operations"][1]["params"].update(weight="r1.shift"),
            WeightsMismatch,
            "int32",
        ),
    ],
)
def test_bad_programs_are_refused_with_their_code(
    change: Any, error: type[WaiOpsError], words: str
) -> None:
    b = every_op()
    with pytest.raises(error) as info:
        load_program(_edit(b, change), b.weights())
    assert type(info.value) is error or error is WaiOpsError
    assert words in info.value.message
    assert info.value.code.startswith("waiops_")


def test_weights_of_the_wrong_dtype_shape_or_values_are_refused() -> None:
    b = every_op()
    b.tensors["d1.weight"] = b.tensors["d1.weight"].astype(np.float32)
    with pytest.raises(WeightsMismatch, match=r"d1: tensor .d1\.weight. is float32"):
        _load(b)
    b = every_op()
    b.tensors["d1.bias"] = np.zeros(5, np.int32)
    with pytest.raises(WeightsMismatch, match=r"d1: tensor 'd1.bias' has shape \[5\], not \[4\]"):
        _load(b)
    b = every_op()
    b.tensors["g1.gamma"][0, 0] = -1
    with pytest.raises(WeightsMismatch, match=r"g1\.gamma"):
        _load(b)
    b = every_op()
    b.tensors["r1.shift"][0] = 31
    with pytest.raises(WeightsMismatch, match=r"r1\.shift"):
        _load(b)
    b = every_op()
    b.tensors["stray"] = np.zeros(1, np.int32)
    with pytest.raises(WeightsMismatch, match="stray"):
        _load(b)
    b = every_op()
    with pytest.raises(WeightsMismatch, match="SafeTensors"):
        load_program(b.program_json("o", 3), b"not safetensors")
    b = every_op()
    b.tensors.pop("c2.weight")
    with pytest.raises(WeightsMismatch, match=r"c2\.weight"):
        _load(b)


def test_a_program_that_breaks_the_bound_rule_is_refused_naming_the_operation() -> None:
    b = every_op()
    b.tensors["d1.weight"][0, 1, 2, 2] = 32767  # one big tap: x (≤ 328) · 32767 plus the rest
    b.input_range = (-(2**17), 2**17)
    with pytest.raises(BoundExceeded) as info:
        _load(b)
    assert info.value.code == "waiops_bound_exceeded"
    assert info.value.message.startswith("d1: accumulator of channel 1 reaches ")
    assert "2^31 - 1 (bound rule)" in info.value.message


def test_the_output_must_be_proven_rgb8_when_the_set_says_so() -> None:
    b = every_op()
    doc = json.loads(b.program_json("o", 3))
    doc["operations"][-1]["attrs"]["clamp"] = [0, 256]
    with pytest.raises(BoundExceeded, match=r"not inside the RGB8 range"):
        load_program(json.dumps(doc).encode(), b.weights(), rgb8_output=True)


def test_inputs_outside_the_range_or_shape_are_refused_before_running() -> None:
    program = _load(every_op())
    with pytest.raises(InputOutOfRange, match="21 is outside") as info:
        reference.run(program, np.full((1, 3, 2, 2), 21, np.int32))
    assert info.value.code == "waiops_input_out_of_range"
    with pytest.raises(InputShapeOverLimits):
        reference.run(program, np.zeros((1, 4, 2, 2), np.int32))
    with pytest.raises(InputShapeOverLimits, match="over the limits"):
        reference.run(program, np.zeros((1, 3, 1, 257), np.int32))
    with pytest.raises(InputOutOfRange, match="float"):
        reference.run(program, np.zeros((1, 3, 2, 2), np.float32))


@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 4))
def test_the_bound_rule_is_sound(seed: int, h: int, w: int) -> None:
    """No value the reference computes leaves the interval the rule proved, on inputs at the
    declared range's ends as well as inside."""
    rng = np.random.default_rng(seed)
    program = _load(every_op(rng=np.random.default_rng(seed % 7)), rgb8_output=True)
    x = rng.choice(np.array([-20, 20, 0, -19, 19]), size=(1, 3, h, w)).astype(np.int32)
    values = {program.input_name: x[0].astype(np.int64)}
    for op in program.operations:
        out = reference.apply(op, values)
        lo, hi = program.bounds[op.output]
        assert (out >= lo[:, None, None]).all() and (out <= hi[:, None, None]).all(), op.name
        values[op.output] = out
