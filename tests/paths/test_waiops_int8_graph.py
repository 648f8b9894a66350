"""The int8 graph engine of wai-ops/1 (paths/waiops/int8_graph.py: the whole program as one ONNX
Runtime graph, its convolutions on ``ConvInteger``) against the int64 reference, bit for bit: on
every operation and each form a convolution takes in the graph (phases split, merged, the
1×1-and-scatter form, stride 1, float32 and float64 programs), at the 16-bit pair edge of its
planes, on the hyperprior's hyper-synthesis and on corpus payloads, in fresh processes with 1
and 2 threads and under emulated older CPUs. A constructed layer shows what planes of ±128 do
on the saturating u8×s8 kernel (AVX2 without VNNI): that run must differ there."""

from __future__ import annotations

import dataclasses
import platform
import shutil
from pathlib import Path

import numpy as np
import pytest
from int8_runs import EMULATED, run_check
from waiops_programs import every_op

from wai_dispatch.conformance import retired_dir, sets_dir
from wai_dispatch.paths.onnx import shared_session_options
from wai_dispatch.paths.waiops import choose, int8_graph, reference
from wai_dispatch.paths.waiops.build import ProgramBuilder
from wai_dispatch.paths.waiops.int8_graph import Int8GraphEngine, plane_ranges, weight_digits
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.tools import int8_check


def _saturating_kernel() -> bool:
    """Whether this CPU's ``ConvInteger`` (uint8 weights × int8 activations, the graph's
    pairing) saturates a pair of products: weights stored as 255, activations −128."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    w = np.full((8, 64, 1, 1), 255, dtype=np.uint8)
    graph = helper.make_graph(
        [helper.make_node("ConvInteger", ["x", "w"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 64, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 8, 2, 2])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort.InferenceSession(
        model.SerializeToString(), shared_session_options(), providers=["CPUExecutionProvider"]
    )
    (y,) = session.run(None, {"x": np.full((1, 64, 2, 2), -128, dtype=np.int8)})
    return not np.array_equal(np.asarray(y), np.full((1, 8, 2, 2), 64 * 255 * -128))


def test_weight_digits_and_planes_recombine_within_their_ranges() -> None:
    w = np.array([-32768, -30428, -646, -255, -129, -128, 0, 1, 127, 128, 254, 32639])
    z, digits = weight_digits(w)
    assert z == 128 and len(digits) == 2
    assert len(weight_digits(np.array([-32768, 32767]))[1]) == 3  # int16 ends: a third digit
    assert all(-z <= int(d.min()) and int(d.max()) <= 255 - z for d in digits)
    assert np.array_equal(sum(d * 256**i for i, d in enumerate(digits)), w)
    z, digits = weight_digits(np.array([-127, 128]))  # one digit with the zero point 127
    assert z == 127 and len(digits) == 1
    assert plane_ranges(-511, 511) == [(-64, 63), (-4, 4)]
    assert plane_ranges(-64, 64) == [(-64, 64)]
    assert plane_ranges(0, 4095) == [(-64, 63), (0, 32)]  # 0 is in every range (the padding)
    assert plane_ranges(-(1 << 20), 1 << 20) == [(-64, 63)] * 2 + [(-64, 64)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_graph_equals_the_reference_on_every_op(seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = every_op(rng=rng)  # its transposed convolution has 4 outputs: the scatter form
    out = b.operations[-1]["output"]
    program = load_program(b.program_json(out, 3), b.weights(), rgb8_output=True)
    x = rng.integers(*program.input_range, (1, 3, 5 + seed, 7), endpoint=True).astype(np.int32)
    assert np.array_equal(Int8GraphEngine(program).run(x), reference.run(program, x))


def _deconvs(co: int, stride: int, wide: bool, seed: int) -> tuple[Program, np.ndarray]:
    """A transposed convolution (``co`` outputs), then a plain one: float64 when ``wide``
    (bounds past 2^24), its weights past one digit; the input at its range's ends and 0."""
    rng = np.random.default_rng(seed)
    lo, hi = (-3000, 2900) if wide else (-60, 60)
    b = ProgramBuilder("x", 20, (lo, hi))
    q = stride - 1
    w = rng.integers(-700, 700, (20, co, 5, 5)).astype(np.int16)
    attrs = {"kernel": 5, "stride": stride, "padding": 2, "output_padding": q}
    bias = rng.integers(-999, 999, co).astype(np.int32)
    b.add("conv_transpose2d", "d", ["x"], "a", attrs, {"weight": w, "bias": bias})
    m, s = np.ones(co, np.int32), np.full(co, 12, np.int32)
    b.add("requantize", "r", ["a"], "y", {"clamp": [-900, 900]}, {"multiplier": m, "shift": s})
    w2 = rng.integers(-127, 127, (3, co, 3, 3)).astype(np.int8)
    b.add("conv2d", "c", ["y"], "o", {"kernel": 3, "padding": 1}, {"weight": w2, "bias": bias[:3]})
    program = load_program(b.program_json("o", 3), b.weights())
    x = rng.choice(np.array([lo, hi, 0, 1, -1]), (1, 20, 6, 5)).astype(np.int32)
    return program, x


@pytest.mark.parametrize(
    ("co", "stride", "wide"),
    [(24, 2, False), (24, 2, True), (4, 2, True), (4, 2, False), (6, 1, False)],
    ids=["split-f32", "split-f64", "merged-f64", "scatter-f32", "stride-1"],
)
def test_every_form_of_a_convolution_equals_the_reference(co: int, stride: int, wide: bool) -> None:
    program, x = _deconvs(co, stride, wide, seed=co + stride)
    assert program.float32_exact is not wide
    assert np.array_equal(Int8GraphEngine(program).run(x), reference.run(program, x))


@pytest.mark.parametrize("wide", [False, True], ids=["one-plane", "two-planes"])
def test_a_scatter_after_split_phases_reads_their_columns_unwoven(wide: bool) -> None:
    """A transposed convolution with few outputs (the scatter) reading a split one's phases
    (columns side by side): each half of the columns runs its own stride-(2, 4) scatter, and
    the picture is the reference's, at odd sizes, the input at its range's ends and 0; its
    input's one plane (or two) is split, never woven."""
    import onnx

    rng = np.random.default_rng(7 + wide)
    b = ProgramBuilder("x", 20, (-60, 60))
    attrs = {"kernel": 5, "stride": 2, "padding": 2, "output_padding": 1}
    w = rng.integers(-127, 127, (20, 24, 5, 5)).astype(np.int8)
    b.add(
        "conv_transpose2d", "d1", ["x"], "a", attrs, {"weight": w, "bias": np.zeros(24, np.int32)}
    )
    m, s = np.ones(24, np.int32), np.full(24, 9, np.int32)
    clamp = [-500, 500] if wide else [-64, 64]
    b.add("requantize", "r1", ["a"], "y", {"clamp": clamp}, {"multiplier": m, "shift": s})
    w2 = rng.integers(-127, 127, (24, 3, 5, 5)).astype(np.int8)
    bias = rng.integers(-999, 999, 3).astype(np.int32)
    b.add("conv_transpose2d", "d2", ["y"], "o", attrs, {"weight": w2, "bias": bias})
    program = load_program(b.program_json("o", 3), b.weights())
    assert program.float32_exact
    engine = Int8GraphEngine(program)
    ops = [node.op_type for node in onnx.load_from_string(engine.model).graph.node]
    assert ops.count("ConvTranspose") == 2 and ops.count("Split") == 1 + wide
    assert "Unsqueeze" not in ops  # no column weave
    for h, w_ in ((5, 7), (6, 4), (1, 1)):
        x = rng.choice(np.array([-60, 60, 0, 1, -1]), (1, 20, h, w_)).astype(np.int32)
        assert np.array_equal(engine.run(x), reference.run(program, x))


def test_the_16_bit_edge_layer_is_exact_with_7_bit_planes() -> None:
    program, x = int8_check.graph_edge_program(7)
    assert np.array_equal(Int8GraphEngine(program).run(x), reference.run(program, x))


def test_planes_of_128_break_on_the_saturating_kernel_and_the_edge_layer_catches_it() -> None:
    program, x = int8_check.graph_edge_program(8)
    int8_graph.set_plane_bits(8)
    try:
        eight = Int8GraphEngine(program)
    finally:
        int8_graph.set_plane_bits(7)
    exact = np.array_equal(eight.run(x), reference.run(program, x))
    # AVX2/AVX-512BW without VNNI: vpmaddubsw saturates 2·255·128 — the layer must show it;
    # elsewhere (SSE4.1's widening kernels, VNNI, AMX) ±128 planes happen to be exact too.
    assert exact is not _saturating_kernel()


def test_the_hyper_synthesis_runs_on_the_graph_and_the_chooser_picks_it() -> None:
    # the retired hyperprior set's h_s: past 2^24 (the bundled one is float32-exact,
    # tests/tools/test_hyperprior_units.py); envelopes written for it still decode where installed
    h = int8_check.hyper_program(retired_dir() / "bmshj2018-hyperprior-demo-q3")
    assert not h.float32_exact  # its pointwise steps run in float64
    rng = np.random.default_rng(9)
    z = rng.choice(np.array(h.input_range), (1, h.input_channels, 4, 3)).astype(np.int32)
    assert np.array_equal(Int8GraphEngine(h).run(z), reference.run(h, z))
    assert choose.engine_name(choose.build(h)) == "int8-graph"


def test_an_inverse_gdn_past_2_24_is_refused_and_the_chooser_falls_back() -> None:
    b = every_op()
    out = b.operations[-1]["output"]
    program = load_program(b.program_json(out, 3), b.weights(), rgb8_output=True)
    wide = dataclasses.replace(program, largest=1 << 25)  # as if past 2^24
    assert not wide.float32_exact
    with pytest.raises(int8_graph.NotGraphExact, match="inverse GDN"):
        Int8GraphEngine(wide)
    assert choose.engine_name(choose.build(wide, want="int8-graph")) == "int8"
    assert choose.engine_name(choose.build(program, want="int8-graph")) == "int8-graph"
    assert choose.engine_name(choose.build(program)) == "float32"  # 2.5 products a MAC


def _run_nodes(g: int8_graph._G, name: str, x: np.ndarray, out: str, out_type: int) -> np.ndarray:
    """The nodes of ``g`` as one ONNX Runtime session, ``x`` (channels × values) fed to input
    ``name`` as ``[1, C, N, 1]``; its output ``out`` (of ONNX type ``out_type``) as C × N."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    kind = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    graph = helper.make_graph(
        g.nodes,
        "nodes",
        [helper.make_tensor_value_info(name, kind[x.dtype], [1, x.shape[0], None, 1])],
        [helper.make_tensor_value_info(out, out_type, None)],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", int8_graph.OPSET)])
    model.ir_version = 8
    session = ort.InferenceSession(
        model.SerializeToString(), shared_session_options(), providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(None, {name: x[None, :, :, None]})
    return np.asarray(got)[0, :, :, 0]


def test_an_inverse_gdn_s_rounding_to_a_plane_is_exact_at_every_tie() -> None:
    """``QuantizeLinear`` of ``v + 1/2`` (the inverse GDN's last step, when only convolutions
    read it) is ``clamp(round_shift(v, s), −64, 64)`` for every shift, at and beside every tie,
    for negatives, and at ``|v|`` up to 2^23 − 1."""
    from onnx import TensorProto

    shift = np.arange(15)
    rng = np.random.default_rng(4)
    ties = [(k << s >> 1) + d for s in shift for k in range(-140, 141) for d in (-1, 0, 1)]
    n = len(ties) // len(shift)
    v = np.concatenate(
        [
            np.array(ties).reshape(len(shift), n),
            rng.integers(-(1 << 23) + 1, 1 << 23, (len(shift), 4096)),
        ],
        axis=1,
    )
    g = int8_graph._G(np.float32, 7)
    out = int8_graph._round_to_plane(g, "v", shift, [-64, 64])
    got = _run_nodes(g, "v", v.astype(np.float32), out, TensorProto.INT8)
    half = np.where(shift > 0, 1 << np.maximum(shift - 1, 0), 0)[:, None]
    want = np.clip((v + half) >> shift[:, None], -64, 64)
    assert np.array_equal(got, want)


def test_a_fused_requantize_s_dequantize_is_exact_at_every_tie() -> None:
    """``Floor(DequantizeLinear(acc, 2^−s) + (bias + half) · 2^−s)`` (a convolution's int32
    accumulator read by its requantize) is ``round_shift(acc + bias, s)`` for every shift, at
    and beside every tie, for negatives, and with ``|acc + bias + half|`` up to 2^24 − 1."""
    from onnx import TensorProto

    shift = np.arange(15)
    rng = np.random.default_rng(5)
    half = np.where(shift > 0, 1 << np.maximum(shift - 1, 0), 0)
    bias = rng.integers(-(1 << 20), 1 << 20, len(shift)) + half
    ties = [
        (k << s) - b + d
        for s, b in zip(shift, bias, strict=True)
        for k in range(-140, 141)
        for d in (-1, 0, 1)
    ]
    n = len(ties) // len(shift)
    top = (1 << 24) - 1 - np.abs(bias)[:, None]
    acc = np.concatenate(
        [np.array(ties).reshape(len(shift), n), rng.integers(-top, top + 1, (len(shift), 4096))],
        axis=1,
    )
    acc[:, :2] = np.concatenate([-top, top], axis=1)  # the ends: |acc + bias| at 2^24 - 1
    g = int8_graph._G(np.float32, 7)
    out = g.node("Floor", [int8_graph._dequantize(g, "acc", bias.astype(np.float64), shift)])
    got = _run_nodes(g, "acc", acc.astype(np.int32), out, TensorProto.FLOAT)
    want = (acc + bias[:, None]) >> shift[:, None]
    assert np.array_equal(got, want)


def test_the_bundled_set_s_phases_are_woven_once_on_the_int8_plane() -> None:
    """The int8-units set's transposed convolutions leave their phases side by side (rows
    woven by a ``Concat``), the glue and the inverse GDN run on them so, and the columns are
    woven on the int8 plane the next ``ConvInteger`` reads, or, for ``deconv4``'s scatter, not
    at all (its two column halves, a ``ConvTranspose`` each): no float weave, no
    ``DepthToSpace``, and each requantize's shift is in its convolution's
    ``DequantizeLinear``."""
    import onnx

    units = _set_program(sets_dir() / "int-synth-int8-units-demo-q3")
    model = onnx.load_from_string(int8_graph.build_model(units)[0])
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("ConvTranspose") == 2 and "DepthToSpace" not in ops
    assert ops.count("DequantizeLinear") == 3 and ops.count("Split") == 3
    assert ops.count("Unsqueeze") == 4  # the columns of deconv2's and deconv3's inputs


def test_the_bundled_set_s_inverse_gdns_end_in_its_planes() -> None:
    """Every inverse GDN of the int8-units set feeds a convolution one plane wide with
    ``|x · r|`` below 2^23: each ends in ``QuantizeLinear``, the next ``ConvInteger``'s input."""
    import onnx

    units = _set_program(sets_dir() / "int-synth-int8-units-demo-q3")
    assert max(units.roots_products.values()) < 1 << 23
    model = onnx.load_from_string(int8_graph.build_model(units)[0])
    assert sum(node.op_type == "QuantizeLinear" for node in model.graph.node) == 3


def _set_program(folder: Path) -> Program:
    (program,) = folder.glob("*.wai-ops.json")
    weights = program.with_name(program.name.removesuffix(".wai-ops.json") + ".safetensors")
    return load_program(program.read_bytes(), weights.read_bytes())


def test_auto_picks_int8_graph_by_the_program_s_products_a_multiply_accumulate() -> None:
    units = _set_program(sets_dir() / "int-synth-int8-units-demo-q3")
    retired = _set_program(retired_dir() / "int-synth-demo-q3")
    assert units.float32_exact and retired.float32_exact
    runner = choose.build(units)
    assert isinstance(runner, Int8GraphEngine) and runner.per_mac == pytest.approx(1.065, abs=1e-3)
    assert choose.machine_engine(program=units) == "int8-graph"
    old = choose.build(retired)  # 2.41 products a MAC: past the threshold
    assert choose.engine_name(old) == "float32"
    assert Int8GraphEngine(retired).per_mac > choose.INT8_GRAPH_PER_MAC >= runner.per_mac
    assert choose.machine_engine(program=retired) == "float32"
    assert choose.engine_name(choose.build(retired, want="int8-graph")) == "int8-graph"
    assert choose.engine_name(choose.build(units, want="float32")) == "float32"
    h = int8_check.hyper_program()  # not float32-exact: int8-graph whatever its count
    assert choose.machine_engine(program=h) == "int8-graph"
    assert choose.machine_engine() == choose.AUTO_RULE


@pytest.mark.parametrize("threads", [1, 2])
def test_corpus_payloads_and_h_s_are_exact_with_1_and_2_threads(threads: int) -> None:
    result = run_check("--engine", "int8-graph", "--threads", str(threads))
    assert result["threads"] == threads and result["engine"] == "int8-graph"
    assert result["ok"], result["checks"]
    assert set(result["checks"]) >= {  # type: ignore[arg-type]
        "chelsea-16x16",
        "extreme-symbols-320x192",
        "edge-16-bit-pairs",
        "hyperprior-h_s",
    }


@pytest.mark.parametrize("cpu", EMULATED)
@pytest.mark.slow
def test_exact_on_emulated_older_cpus(cpu: str) -> None:
    """One small payload, the edge layer and h_s per CPU model (qemu: a few minutes)."""
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-user is not installed (apt-get install qemu-user): no emulated CPUs")
    if platform.machine() != "x86_64":
        pytest.skip("the emulated CPU models are x86-64 ones; this machine is not x86-64")
    result = run_check(
        "--engine", "int8-graph", "--payloads", "chelsea-16x16", "--threads", "2", cpu=cpu
    )
    assert result["ok"], (cpu, result["checks"])
    eight = run_check(
        "--engine",
        "int8-graph",
        "--payloads",
        "--no-hyper",
        "--plane-bits",
        "8",
        "--threads",
        "1",
        cpu=cpu,
    )
    # the edge layer with ±128 planes: exact on the SSE4.1 kernel, saturated on AVX2's
    assert eight["ok"] is (cpu == "SandyBridge"), (cpu, eight)
