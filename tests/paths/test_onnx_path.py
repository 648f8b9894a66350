"""The ONNX Runtime path on real ONNX Runtime sessions: §4's answers, the placement (§5), the
run, the sub-pixel rewrite's exactness, and the path inside ``dispatch.choose``."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.dispatch import (
    BMSHJ2018,
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    NPU_MODEL_RUNTIME,
    REFERENCE_OFFER,
    BackendFailed,
    Code,
    Placement,
    Unit,
    choose,
    demand,
)
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.lru import LRU, Programs
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter, shared_session_options
from wai_dispatch.paths.onnx_placement import (
    placement_from_trace,
    placement_of_program,
    program_operations,
)
from wai_dispatch.paths.onnx_rewrite import (
    SPLIT_MIN_CHANNELS,
    phase_split_weights,
    phase_weights,
    phases,
    rewrite_model,
    shuffle_weights,
)
from wai_dispatch.tools.onnx_synthesis import memory_set, random_layers


@pytest.fixture(scope="module")
def the_set() -> LoadedSet:
    return memory_set(random_layers(seed=0))


@pytest.fixture(scope="module")
def adapter() -> OnnxRuntimeAdapter:
    return OnnxRuntimeAdapter()


@pytest.fixture(scope="module")
def plain_adapter() -> OnnxRuntimeAdapter:
    return OnnxRuntimeAdapter(rewrite=False)


def latent(h: int = 5, w: int = 7, c: int = 192, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0, 2.0, (1, c, h, w))).astype(np.float32)


# --- §4's questions ------------------------------------------------------------------------


def test_unit_present_on_cpu(adapter: OnnxRuntimeAdapter) -> None:
    assert adapter.path == CPU_ONNX_RUNTIME
    assert adapter.unit_present()
    assert adapter.absent_reason() is None


@pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="this build has CUDA"
)
def test_gpu_absent_without_cuda_says_why() -> None:
    gpu = OnnxRuntimeAdapter(Unit.GPU)
    assert not gpu.unit_present()
    assert "CUDAExecutionProvider" in (gpu.absent_reason() or "")


def test_npu_is_not_an_onnx_runtime_unit() -> None:
    with pytest.raises(ValueError, match="cpu or gpu"):
        OnnxRuntimeAdapter(Unit.NPU)


def test_program_absent(adapter: OnnxRuntimeAdapter, the_set: LoadedSet) -> None:
    assert adapter.program_present(SynthesisJob(the_set, latent()))
    no_file = LoadedSet.from_files(
        {"decoder.weights": the_set.read("decoder.weights")}, facts=the_set.facts
    )
    assert not adapter.program_present(SynthesisJob(no_file, latent()))
    no_fact = LoadedSet.from_files(the_set.files, facts={})
    assert not adapter.program_present(SynthesisJob(no_fact, latent()))


def test_takes_shape(adapter: OnnxRuntimeAdapter, the_set: LoadedSet) -> None:
    assert adapter.takes_shape(SynthesisJob(the_set, latent()))
    assert not adapter.takes_shape(SynthesisJob(the_set, latent(c=100)))  # channels
    assert not adapter.takes_shape(SynthesisJob(the_set, latent().astype(np.float64)))
    assert not adapter.takes_shape(SynthesisJob(the_set, latent()[0]))  # 3-D
    assert not adapter.takes_shape(SynthesisJob(the_set, np.zeros((1, 192, 0, 4), np.float32)))


def _session_node_count(model: bytes, weights: bytes) -> int:
    """Nodes of the graph ONNX Runtime runs (optimised as the adapter's sessions are)."""
    with tempfile.TemporaryDirectory() as tmp:
        so = shared_session_options()
        so.add_external_initializers_from_files_in_memory(
            ["decoder.weights"], [weights], [len(weights)]
        )
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        saved = onnx.load(so.optimized_model_filepath, load_external_data=False)
    return sum(1 for n in saved.graph.node if n.op_type != "Constant")


def _program_operation_count(model: bytes) -> int:
    return sum(1 for n in onnx.load_from_string(model).graph.node if n.op_type != "Constant")


@pytest.mark.parametrize("glue", ["split", "shuffle", "depth-to-space", None])
def test_plan_counts_the_programs_operations_all_on_cpu(
    the_set: LoadedSet, glue: str | None
) -> None:
    """§5: the placement counts the set's program's operations (16 for bmshj2018's
    synthesis), not the nodes of the rewritten, optimised graph ONNX Runtime runs; those are
    reported apart (runtime_nodes), as the optimised model ONNX Runtime saves has them."""
    ad = OnnxRuntimeAdapter(rewrite=glue is not None, glue=glue or "split")
    job = SynthesisJob(the_set, latent())
    model, weights = the_set.read("decoder.onnx"), the_set.read("decoder.weights")
    assert _program_operation_count(model) == 16
    assert ad.plan(job) == Placement(cpu=16)
    if glue is not None:
        proto = onnx.load_from_string(model)
        assert rewrite_model(proto, {"decoder.weights": weights}, glue) == 4
        model = proto.SerializeToString()
    assert ad.rewritten(job) == (0 if glue is None else 4)
    assert ad.runtime_nodes(job) == Placement(cpu=_session_node_count(model, weights))
    assert ad.runtime_nodes(job).cpu > 16


def test_bundled_set_plan_is_its_sixteen_operations(tmp_path: Path) -> None:
    """The demo set's program: 16 operations, as its facts state; all on the CPU here."""
    from wai_dispatch.codec.sets import SetStore
    from wai_dispatch.conformance import sets_dir

    store = SetStore(tmp_path / "sets")
    installed = store.install(sets_dir() / "bmshj2018-demo-q3")
    set_files = store.open(installed.digest)
    program = set_files.facts.program("onnx-runtime")
    assert program is not None
    raw = json.loads((sets_dir() / "bmshj2018-demo-q3" / "set.json").read_bytes())
    stated = raw["facts"]["programs"]["onnx-runtime"]["operations"]
    job = SynthesisJob(set_files, latent(16, 16))
    assert stated == 16
    assert OnnxRuntimeAdapter().plan(job) == Placement(cpu=stated)


def _kernel(name: str, op: str, provider: str, dur: int = 10) -> dict[str, object]:
    args = {"op_name": op, "provider": provider}
    return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur, "args": args}


CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


def test_placement_of_program_attributes_derived_nodes() -> None:
    """Each operation once, on the unit that ran the nodes derived from it (longest name
    prefix); the runtime's own layout nodes count for nothing."""
    ops = ["/d1/ConvTranspose", "/g1/Mul", "/g1/Conv", "/g1/Mul_1", "/d2/ConvTranspose"]
    events = [
        {"cat": "Session", "name": "model_run", "args": {}},
        _kernel("ReorderInput", "ReorderInput", CPU),
        _kernel("/d1/ConvTranspose.subpixel.phase0.conv", "Conv", CUDA, 500),
        _kernel("/d1/ConvTranspose.subpixel.phase0.flat", "Reshape", CPU, 900),  # layout only
        _kernel("/d1/ConvTranspose.subpixel.shuffle", "ConvTranspose", CUDA, 20),
        _kernel("/g1/Mul", "Mul", CUDA),
        _kernel("/g1/Conv_output_0_nchwc", "Conv", CPU),
        _kernel("/g1/Mul_1", "Mul", CUDA),
        _kernel("/g1/Mul_1", "Mul", CUDA),  # a second run of the same node
        _kernel("MemcpyToHost", "MemcpyToHost", CUDA),
        _kernel("/d2/ConvTranspose", "ConvTranspose", "SomeOtherExecutionProvider"),
    ]
    assert placement_of_program(ops, events) == Placement(gpu=3, cpu=1, unknown=1)


def test_runtime_nodes_from_trace() -> None:
    """The runtime graph's nodes (plan --json's runtime_nodes): each node once, constants and
    host/device copies left out."""
    events = [
        {"cat": "Session", "name": "model_run", "args": {}},
        _kernel("a", "Conv", CPU),
        _kernel("a", "Conv", CPU),  # a second run of the same node
        _kernel("b", "Conv", CUDA),
        _kernel("c", "Constant", CPU),
        _kernel("d", "Relu", "SomeOtherExecutionProvider"),
        _kernel("e", "MemcpyToHost", CUDA),
        {"cat": "Node", "name": "a_fence_before", "args": {"op_name": "Conv"}},
    ]
    assert placement_from_trace(events) == Placement(cpu=1, gpu=1, unknown=1)


def test_placement_of_program_split_operation_goes_where_its_arithmetic_ran() -> None:
    ops = ["/conv"]
    events = [
        _kernel("/conv.phase0", "Conv", CPU, 300),
        _kernel("/conv.phase1", "Conv", CUDA, 100),
        _kernel("/conv.phase2", "Conv", CUDA, 100),
        _kernel("/conv.join", "Concat", CPU, 10_000),
    ]
    assert placement_of_program(ops, events) == Placement(cpu=1)
    events[0] = _kernel("/conv.phase0", "Conv", CPU, 150)
    assert placement_of_program(ops, events) == Placement(gpu=1)


def test_placement_of_program_operations_without_nodes() -> None:
    """Fused away or folded: where everything ran on one unit, there; else unknown."""
    ops = ["/a", "/fused_into_a"]
    one_unit = [_kernel("/a", "Conv", CPU)]
    assert placement_of_program(ops, one_unit) == Placement(cpu=2)
    two_units = [*one_unit, _kernel("/b", "Relu", CUDA)]
    assert placement_of_program(ops, two_units) == Placement(cpu=1, unknown=1)


def test_program_operations_names_every_node_and_leaves_constants_out() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(1, "f4"))),
        helper.make_node("Add", ["x", "c"], ["t"]),
        helper.make_node("Mul", ["t", "c"], ["u"], name="same"),
        helper.make_node("Mul", ["u", "c"], ["y"], name="same"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    assert program_operations(model) == ["Add_1", "same", "same_3"]


# --- the run -------------------------------------------------------------------------------


def test_run_equals_the_plain_session(
    adapter: OnnxRuntimeAdapter, plain_adapter: OnnxRuntimeAdapter, the_set: LoadedSet
) -> None:
    for h, w in ((16, 16), (3, 5)):
        job = SynthesisJob(the_set, latent(h, w))
        out = adapter.run(job)
        ref = plain_adapter.run(job)
        assert out.dtype == np.float32 and out.shape == (1, 3, 16 * h, 16 * w)
        assert np.abs(ref).max() > 0.1  # a picture, not zeros
        assert np.abs(out - ref).max() < 1e-4


def test_session_cache(the_set: LoadedSet) -> None:
    programs: Programs = LRU(max_entries=1)
    ad = OnnxRuntimeAdapter(programs=programs)
    first = ad.session(SynthesisJob(the_set, latent()))
    assert ad.session(SynthesisJob(the_set, latent(2, 3))) is first  # same digest: a hit
    other = LoadedSet.from_files(the_set.files, facts=the_set.facts, name="another")
    assert ad.session(SynthesisJob(other, latent())) is not first
    assert ad.session(SynthesisJob(the_set, latent())) is not first  # evicted (LRU of 1)
    assert (programs.hits, programs.misses, programs.evictions) == (1, 3, 2)
    assert programs.entries() == [("cpu/onnx-runtime/float", the_set.digest)]


# --- the rewrite ---------------------------------------------------------------------------


def conv_transpose_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, s: int, p: tuple[int, int], op: int
) -> np.ndarray:
    """float64 ConvTranspose2d, straight from its definition: o = s·i - p_begin + k."""
    n, _, h, wd = x.shape
    cout, k = w.shape[1], w.shape[2]
    full = np.zeros((n, cout, (h - 1) * s + k, (wd - 1) * s + k))
    for ky in range(k):
        for kx in range(k):
            full[:, :, ky : ky + s * h : s, kx : kx + s * wd : s] += np.einsum(
                "nchw,cd->ndhw", x, w[:, :, ky, kx]
            )
    ho, wo = (h - 1) * s - p[0] - p[1] + k + op, (wd - 1) * s - p[0] - p[1] + k + op
    full = np.pad(full, ((0, 0), (0, 0), (0, op), (0, op)))
    return full[:, :, p[0] : p[0] + ho, p[0] : p[0] + wo] + b[None, :, None, None]


def conv_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, pads: tuple[int, ...]) -> np.ndarray:
    """float64 correlation, ONNX Conv pads (y_begin, x_begin, y_end, x_end), stride 1."""
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    kh, kw = w.shape[2:]
    ho, wo = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for ky in range(kh):
        for kx in range(kw):
            out += np.einsum("nchw,dc->ndhw", xp[:, :, ky : ky + ho, kx : kx + wo], w[:, :, ky, kx])
    return out + b[None, :, None, None]


def depth_to_space_dcr(x: np.ndarray, s: int) -> np.ndarray:
    n, c, h, w = x.shape
    y = x.reshape(n, s, s, c // (s * s), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (s * s), h * s, w * s)


# (kernel, stride, pad, output_padding): bmshj2018's layer, and other exact splits
SPLITS = [(5, 2, 2, 1), (3, 2, 1, 1), (4, 2, 1, 0), (6, 3, 2, 1)]


@pytest.mark.parametrize(("k", "s", "p", "op"), SPLITS)
def test_phase_split_is_exact_in_float64(k: int, s: int, p: int, op: int) -> None:
    rng = np.random.default_rng(k * 10 + s)
    x = rng.normal(size=(1, 6, 5, 4))
    w, b = rng.normal(size=(6, 5, k, k)), rng.normal(size=5)
    ref = conv_transpose_ref(x, w, b, s, (p, p), op)
    py = phases(k, s, p, p, op)
    nw, nb = phase_split_weights(w, b, py, py)
    assert nb is not None
    out = depth_to_space_dcr(conv_ref(x, nw, nb, (py.pad_begin,) * 2 + (py.pad_end,) * 2), s)
    assert out.shape == ref.shape == (1, 5, 5 * s, 4 * s)
    assert np.abs(out - ref).max() < 1e-12
    # each phase alone ("split"): its own taps and pads, interleaved in CRD order
    split = np.zeros_like(ref)
    for ry in range(s):
        for rx in range(s):
            phase = phase_weights(w, py, py, ry, rx)
            assert phase is not None
            pw, pads = phase
            assert pw.shape[2] * pw.shape[3] == sum(t >= 0 for t in py.taps[ry]) * sum(
                t >= 0 for t in py.taps[rx]
            )  # no zero taps
            split[:, :, ry::s, rx::s] = conv_ref(x, pw, b, tuple(pads))
    assert np.abs(split - ref).max() < 1e-12


def _one_conv_transpose(w: np.ndarray, b: np.ndarray, s: int, p: int, op: int) -> bytes:
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w", "b"],
        ["y"],
        kernel_shape=list(w.shape[2:]),
        strides=[s, s],
        pads=[p] * 4,
        output_padding=[op, op],
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, w.shape[0], "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize(
    ("glue", "cout"), [("split", 40), ("split", 3), ("shuffle", 40), ("depth-to-space", 40)]
)
@pytest.mark.parametrize(("k", "s", "p", "op"), SPLITS)
def test_rewritten_session_matches_float64_conv_transpose(
    k: int, s: int, p: int, op: int, glue: str, cout: int
) -> None:
    rng = np.random.default_rng(k)
    cin = 24
    w = (rng.normal(size=(cin, cout, k, k)) / np.sqrt(cin * k * k / (s * s))).astype(np.float32)
    b = rng.normal(size=cout).astype(np.float32)
    proto = onnx.load_from_string(_one_conv_transpose(w, b, s, p, op))
    assert rewrite_model(proto, {}, glue) == 1
    ops = [n.op_type for n in proto.graph.node]
    if glue == "split" and cout >= SPLIT_MIN_CHANNELS:  # one Conv per phase, joined
        assert ops == ["Conv", "Reshape"] * (s * s) + [
            "Concat",
            "Shape",
            "Mul",
            "Reshape",
            "ConvTranspose",
        ]
    else:  # one Conv for all phases (few output channels: the merged form)
        assert ops == ["Conv", "DepthToSpace" if glue == "depth-to-space" else "ConvTranspose"]
    session = ort.InferenceSession(
        proto.SerializeToString(), shared_session_options(), providers=["CPUExecutionProvider"]
    )
    x = np.round(rng.normal(0, 2, (1, cin, 9, 11))).astype(np.float32)
    ref = conv_transpose_ref(x.astype(np.float64), w.astype(np.float64), b, s, (p, p), op)
    out = session.run(None, {"x": x})[0]
    assert out.shape == ref.shape
    assert np.abs(out - ref).max() < 1e-4 * max(1.0, np.abs(ref).max())


def test_glues_agree_bit_for_bit(the_set: LoadedSet) -> None:
    job = SynthesisJob(the_set, latent(6, 4))
    shuffled = OnnxRuntimeAdapter(glue="shuffle").run(job)
    assert np.array_equal(shuffled, OnnxRuntimeAdapter(glue="depth-to-space").run(job))


def test_split_phases_agree_with_the_merged_conv(the_set: LoadedSet) -> None:
    job = SynthesisJob(the_set, latent(6, 4))
    merged = OnnxRuntimeAdapter(glue="shuffle").run(job)
    split = OnnxRuntimeAdapter(glue="split").run(job)
    assert np.abs(split - merged).max() < 1e-5


def test_shuffle_weights_are_depth_to_space_crd() -> None:
    x = np.arange(2 * 9 * 3 * 4, dtype=np.float64).reshape(1, 2 * 9, 3, 4)
    w = shuffle_weights(2, 3)
    # a grouped ConvTranspose with kernel = stride: each input pixel fills one s×s block
    out = np.einsum("ngphw,gpab->nghawb", x.reshape(1, 2, 9, 3, 4), w.reshape(2, 9, 3, 3))
    crd = x.reshape(1, 2, 3, 3, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 9, 12)
    assert np.array_equal(out.reshape(1, 2, 9, 12), crd)


def test_rewrite_leaves_inexact_splits_alone() -> None:
    w = np.zeros((4, 4, 5, 5), np.float32)
    b = np.zeros(4, np.float32)
    proto = onnx.load_from_string(_one_conv_transpose(w, b, 2, 2, 0))  # output 2h - 1
    assert rewrite_model(proto, {}) == 0
    assert [n.op_type for n in proto.graph.node] == ["ConvTranspose"]


# --- inside dispatch.choose ----------------------------------------------------------------


def test_choose_runs_the_cpu_path(adapter: OnnxRuntimeAdapter, the_set: LoadedSet) -> None:
    job = SynthesisJob(the_set, latent(4, 6))
    decision = choose(
        BMSHJ2018, demand(BMSHJ2018), REFERENCE_OFFER, {CPU_ONNX_RUNTIME: adapter}, job
    )
    report = decision.report
    assert decision.ran == CPU_ONNX_RUNTIME
    assert [(r.path, r.reason) for r in report.refused] == [(NPU_MODEL_RUNTIME, Code.UNIT_ABSENT)]
    assert report.ran is not None and report.ran.placement == adapter.plan(job)
    assert decision.output.shape == (1, 3, 64, 96)
    report.validate()


def test_choose_broken_program_is_backend_failed(the_set: LoadedSet) -> None:
    broken = LoadedSet.from_files(
        {**the_set.files, "decoder.onnx": b"\x00garbage, not a model"}, facts=the_set.facts
    )
    job = SynthesisJob(broken, latent())
    decision = choose(
        BMSHJ2018,
        demand(BMSHJ2018),
        REFERENCE_OFFER,
        {CPU_ONNX_RUNTIME: OnnxRuntimeAdapter()},
        job,
    )
    assert decision.ran is None
    assert [(r.path, r.reason) for r in decision.report.refused] == [
        (NPU_MODEL_RUNTIME, Code.UNIT_ABSENT),
        (CPU_ONNX_RUNTIME, Code.BACKEND_FAILED),
        (CPU_WAI_OPS, Code.ARITHMETIC_MISMATCH),  # §3: bmshj2018's networks are float
    ]
    failure = decision.failures[CPU_ONNX_RUNTIME]
    assert isinstance(failure, BackendFailed) and failure.__cause__ is not None


# --- against CompressAI ----------------------------------------------------------------------


@pytest.mark.tools
def test_compressai_g_s_equals_the_onnx_program() -> None:
    torch = pytest.importorskip("torch")
    from wai_dispatch.tools._compressai import factorized_prior
    from wai_dispatch.tools.onnx_synthesis import g_s_layers

    torch.manual_seed(0)
    g_s = factorized_prior(128, 192).g_s.eval()
    the_set = memory_set(g_s_layers(g_s))
    x = latent(6, 5)
    out = OnnxRuntimeAdapter().run(SynthesisJob(the_set, x))
    with torch.inference_mode():
        ref = g_s(torch.from_numpy(x)).numpy()
    assert np.abs(out - ref).max() < 1e-4 * max(1.0, float(np.abs(ref).max()))


def test_runs_from_many_threads_agree(adapter: OnnxRuntimeAdapter, the_set: LoadedSet) -> None:
    from concurrent.futures import ThreadPoolExecutor

    job = SynthesisJob(the_set, latent(4, 4))
    expected = adapter.run(job)
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: adapter.run(job), range(8)))
    assert all(np.array_equal(o, expected) for o in outs)


def test_thread_count_from_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The decoder hands the ort_threads setting to the pool it has not made yet."""
    from wai_dispatch.paths import onnx as onnx_path
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.settings import SettingsInvalid, load

    monkeypatch.setattr(onnx_path, "_requested", None)
    monkeypatch.setenv("WAI_ORT_THREADS", "1")
    Decoder.assemble(**load(data_dir=tmp_path).decoder_args(bundled=False), ready=False)
    assert onnx_path._requested == 1
    monkeypatch.setenv("WAI_ORT_THREADS", "")
    Decoder.assemble(**load(data_dir=tmp_path).decoder_args(bundled=False), ready=False)
    assert onnx_path._requested is None
    monkeypatch.setenv("WAI_ORT_THREADS", "two")
    with pytest.raises(SettingsInvalid, match="WAI_ORT_THREADS"):
        load(data_dir=tmp_path)
    Decoder.assemble(tmp_path, bundled=False, ready=False, ort_threads=3)  # reads no variable
    assert onnx_path._requested == 3
