"""The int8 engine of wai-ops/1 (paths/waiops/int8_engine.py) against the int64 reference, bit
for bit: on every operation, at the 16-bit pair edge its planes allow, on the hyperprior's
hyper-synthesis and on corpus payloads; in fresh processes with 1 and 2 ONNX Runtime threads;
under emulated older CPUs (Debian's qemu-user: SSE4.1 only, AVX2 without VNNI). A constructed
layer shows what 8-bit planes do on the saturating u8×s8 kernel (AVX2 without VNNI): that run
must differ there — the test that would have caught the saturation. The engine choice
(paths/waiops/choose.py) and what ``wai-dispatch paths`` says of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from int8_runs import EMULATED, need_qemu, run_check
from waiops_programs import every_op

from wai_dispatch.conformance import retired_dir
from wai_dispatch.paths.onnx import shared_session_options
from wai_dispatch.paths.waiops import choose, int8_engine, reference
from wai_dispatch.paths.waiops.int8_engine import Int8Engine, weight_digits
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.tools import int8_check

ROOT = Path(__file__).resolve().parents[2]


def _saturating_kernel() -> bool:
    """Whether this CPU's ONNX Runtime u8×s8 MatMulInteger saturates a pair of products (the
    AVX2/AVX-512BW ``vpmaddubsw`` kernel without VNNI): 255 · −128 in every product."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    b = np.full((64, 8), -128, dtype=np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, 64])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, 8])],
        [numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    session = ort.InferenceSession(
        model.SerializeToString(), shared_session_options(), providers=["CPUExecutionProvider"]
    )
    (y,) = session.run(None, {"a": np.full((4, 64), 255, dtype=np.uint8)})
    return not np.array_equal(np.asarray(y), np.full((4, 8), 64 * 255 * -128))


def test_weight_digits_recombine_and_stay_within_127() -> None:
    w = np.array([-32512, -30428, -646, -255, -128, -127, 0, 1, 127, 128, 254, 255, 32512])
    digits = weight_digits(w)
    assert len(digits) == 2
    assert len(weight_digits(np.array([-32768, 32767]))) == 3  # int16's ends: a third digit
    assert all(int(np.abs(d).max()) <= 127 and d.dtype == np.int8 for d in digits)
    assert np.array_equal(sum(d.astype(np.int64) * 255**i for i, d in enumerate(digits)), w)
    assert len(weight_digits(np.array([-127, 5, 127]))) == 1
    assert int8_engine.activation_planes(1022) == 2 and int8_engine.activation_planes(127) == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_int8_engine_equals_the_reference_on_every_op(seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = every_op(rng=rng)
    out = b.operations[-1]["output"]
    program = load_program(b.program_json(out, 3), b.weights(), rgb8_output=True)
    x = rng.integers(*program.input_range, (1, 3, 5 + seed, 7), endpoint=True).astype(np.int32)
    assert np.array_equal(Int8Engine(program).run(x), reference.run(program, x))


def test_the_16_bit_edge_layer_is_exact_with_7_bit_planes() -> None:
    program, x = int8_check.edge_program()
    assert np.array_equal(Int8Engine(program).run(x), reference.run(program, x))


def test_8_bit_planes_break_on_the_saturating_kernel_and_the_edge_layer_catches_it() -> None:
    program, x = int8_check.edge_program()
    int8_engine.set_plane_bits(8)
    try:
        eight = Int8Engine(program)
    finally:
        int8_engine.set_plane_bits(7)
    exact = np.array_equal(eight.run(x), reference.run(program, x))
    # AVX2/AVX-512BW without VNNI: vpmaddubsw saturates 2·255·127 — the layer must show it;
    # elsewhere (SSE4.1's widening kernels, VNNI, AMX) 8-bit planes happen to be exact too.
    assert exact is not _saturating_kernel()


def test_the_hyperprior_hyper_synthesis_is_exact_on_int8() -> None:
    # the retired hyperprior set's h_s: past 2^24 (the bundled one is float32-exact,
    # tests/tools/test_hyperprior_units.py); envelopes written for it still decode where installed
    h = int8_check.hyper_program(retired_dir() / "bmshj2018-hyperprior-demo-q3")
    assert not h.float32_exact  # past 2^24: the float32 graph cannot take it, int8 can
    rng = np.random.default_rng(9)
    z = rng.choice(np.array(h.input_range), (1, h.input_channels, 4, 3)).astype(np.int32)
    assert np.array_equal(Int8Engine(h).run(z), reference.run(h, z))
    assert choose.engine_name(choose.build(h, want="int8")) == "int8"
    # auto: the int8 graph engine first (paths/waiops/int8_graph.py), this one behind it
    assert choose.engine_name(choose.build(h)) == "int8-graph"


@pytest.mark.parametrize("threads", [1, 2])
def test_corpus_payloads_and_h_s_are_exact_with_1_and_2_threads(threads: int) -> None:
    result = run_check("--threads", str(threads))
    assert result["threads"] == threads
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
    """One small payload, the edge layer and h_s per CPU model (qemu is slow: about a minute)."""
    need_qemu()
    result = run_check("--payloads", "chelsea-16x16", "--threads", "1", cpu=cpu)
    assert result["ok"], (cpu, result["checks"])
    eight = run_check("--payloads", "--no-hyper", "--plane-bits", "8", "--threads", "1", cpu=cpu)
    # the edge layer with 8-bit planes: exact on SSE4.1's widening kernel, saturated on AVX2's
    assert eight["ok"] is (cpu == "SandyBridge"), (cpu, eight)


#: The int8 units each emulated CPU model has: Haswell no VNNI, SandyBridge not even AVX2.
EMULATED_UNITS = {"Haswell": "avx2 sse4_1", "SandyBridge": "sse4_1"}


@pytest.mark.parametrize("cpu", EMULATED)
def test_the_int8_units_are_the_ones_the_process_sees(cpu: str) -> None:
    """The logs' "CPU int8 units" are the CPUID the kernel picks by, not /proc/cpuinfo, which
    under emulation names the host's (whatever this machine has, qemu's model has these)."""
    need_qemu()
    code = "from wai_dispatch.paths.waiops.choose import int8_units; print(int8_units())"
    out = subprocess.run(
        ["qemu-x86_64", "-cpu", cpu, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.stdout.splitlines()[-1:] == [EMULATED_UNITS[cpu]], out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("WAI_FULL_CORPUS") != "1",
    reason="about 10 minutes a CPU model under qemu on 2 cores: make bench's long corpus run "
    "(WAI_FULL_CORPUS=1) runs it; CI checks one payload per model above",
)
@pytest.mark.parametrize("cpu", EMULATED)
def test_every_corpus_payload_is_exact_on_emulated_cpus(cpu: str) -> None:
    need_qemu()
    result = run_check("--all", "--threads", "2", cpu=cpu, timeout=3000)
    assert result["ok"], (cpu, result["checks"])


def test_the_engine_choice_and_its_override() -> None:
    b = every_op()
    out = b.operations[-1]["output"]
    program = load_program(b.program_json(out, 3), b.weights(), rgb8_output=True)
    assert choose.engine_name(choose.build(program)) == "float32"
    assert choose.machine_engine() == choose.AUTO_RULE  # each program's, by its count
    assert choose.machine_engine(program=program) == "float32"
    assert choose.engine_name(choose.build(program, want="int8")) == "int8"
    assert choose.machine_engine("int8") == "int8"
    assert choose.engine_name(choose.build(program, want="numpy")) == "numpy"
    with pytest.raises(ValueError):
        choose.build(program, want="int4")


def test_the_setting_reaches_the_chooser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.settings import SettingsInvalid, load

    monkeypatch.setenv("WAI_WAIOPS_ENGINE", "Int8")
    decoder = Decoder.assemble(**load(data_dir=tmp_path).decoder_args(bundled=False), ready=False)
    assert decoder.waiops_engine == "int8"
    monkeypatch.setenv("WAI_WAIOPS_ENGINE", "int4")
    with pytest.raises(SettingsInvalid, match="waiops_engine"):
        load(data_dir=tmp_path)


def test_wai_dispatch_paths_names_the_engine() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("WAI_WAIOPS_ENGINE", None)
    out = subprocess.run(
        [sys.executable, "-m", "wai_dispatch", "paths", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    rows = {r["path"]["backend"]: r for r in json.loads(out.stdout)["paths"] if r["present"]}
    device = rows["wai-ops"]["device"]
    assert device == {"unit": "cpu", "engine": choose.AUTO_RULE}
