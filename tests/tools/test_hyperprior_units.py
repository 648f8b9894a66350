"""The hyperprior writer's ``int8-units`` profile (tools/hyperprior_ptq.py, issue 38): ``h_s``
with one int8 digit per weight and one 7-bit plane per convolution input past the side latent,
so the int8 graph engine computes about one int8 product a multiply-accumulate, exact on every
kernel; its program pinned on one calibration crop (fast) and as the whole set (slow), which is the
bundled set byte for byte, with the corpus written from it; exact against the int64 reference
natively with 1 and 2 threads and under emulated older CPUs (slow); and the retired set's ``h_s``
beside it (two planes, two digits)."""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
from pathlib import Path

import numpy as np
import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: [__import__(m) for m in ("compressai", "onnx", "onnxruntime")],
    "torch",
    "compressai",
    "onnx",
    "onnxruntime",
    reason="the tools extra (torch, CompressAI) and ONNX Runtime",
)

from int8_runs import EMULATED, run_check  # noqa: E402

from wai_dispatch.codec.sets import Manifest  # noqa: E402
from wai_dispatch.conformance import retired_dir, sets_dir  # noqa: E402
from wai_dispatch.paths.waiops import choose, reference  # noqa: E402
from wai_dispatch.paths.waiops.int8_graph import Int8GraphEngine  # noqa: E402
from wai_dispatch.paths.waiops.load import load_program  # noqa: E402
from wai_dispatch.paths.waiops.program import Program  # noqa: E402
from wai_dispatch.service.decoding.hyperprior import HyperStage  # noqa: E402
from wai_dispatch.tools import hyperprior_conformance, hyperprior_ptq  # noqa: E402
from wai_dispatch.tools import wai_bmshj2018_hyperprior_set as writer  # noqa: E402
from wai_dispatch.tools.hyperprior_encode import (  # noqa: E402
    DEMO_CHECKPOINT,
    HyperAnalysis,
    load_hyper_model,
    open_folder,
)
from wai_dispatch.tools.hyperprior_quality import units  # noqa: E402
from wai_dispatch.tools.int_synth_quality import int8_units  # noqa: E402

BUNDLED = sets_dir() / "bmshj2018-hyperprior-int8-units-demo-q3"
#: The bundled set before this one (conformance/retired/README.md): the default profile's.
RETIRED = retired_dir() / "bmshj2018-hyperprior-demo-q3"
PROFILE = hyperprior_ptq.PROFILES["int8-units"]
#: The program (JSON and weights) from one crop of each training picture.
ONE_CROP = "a148530c22ffc73a65197e16537480d92db02260c977c9f84157e400bfbef46b"
#: The whole set the writer gives with ``--profile int8-units`` from the demo weights.
SET_DIGEST = "0d234ea754ac78b84ec80866b058335769830d8b6693d4ccef95a46547c7e0b4"
#: The corpus's symbols digests while the retired set was bundled.
RETIRED_SYMBOLS = {
    "coffee-256x256": "90830c3f5aa82cf41a6d9d47f770344a219136618f22ece725c1ab7d6aa7b6df",
    "chelsea-448x256": "89d9a8c1cc6c01b140026500b8b121938b41caf463c5133252928029e6412f79",
    "hubble-512x384": "90607032f70ecd970ca4bb3a7598e24dfef55593d0f446e187ca0ecbe4fc7fb1",
    "chelsea-64x64": "0afcc1a2352020bd7c169bae411d49ff07cef27e00800a61f2cb68dbec7dd800",
    "extreme-2x3": "e7e8f2266f00797d9f638e6b31a95f8c17ef2e65f1c2fb182025fbfd3ae669d5",
}


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def _one_plane(program: Program) -> None:
    assert program.float32_exact
    rows = {u.name: u for u in int8_units(program)}
    assert sorted(rows) == ["conv3", "deconv1", "deconv2"]
    assert all(u.digits == 1 for u in rows.values())
    assert all(all(u.kernels.values()) for u in rows.values())
    # the side latent at 1/16 needs two planes; the ReLUs' outputs, [0, 64], one
    assert [rows[n].planes for n in ("deconv1", "deconv2", "conv3")] == [2, 1, 1]
    assert rows["deconv2"].input == rows["conv3"].input == (0, PROFILE.act)
    assert all(max(-lo, hi) <= 127 for lo, hi in (u.weights for u in rows.values()))
    engine = Int8GraphEngine(program)
    assert engine.per_mac <= choose.INT8_GRAPH_PER_MAC
    assert choose.machine_engine(program=program) == "int8-graph"
    rng = np.random.default_rng(38)
    lo, hi = program.input_range
    for z in (
        rng.choice(np.array([lo, hi]), (1, program.input_channels, 4, 3)),
        rng.integers(lo, hi + 1, (1, program.input_channels, 5, 7)),
    ):
        z = z.astype(np.int32)
        assert np.array_equal(engine.run(z), reference.run(program, z))


@pytest.mark.slow
def test_one_crop_gives_the_pinned_one_plane_program() -> None:
    model = load_hyper_model(DEMO_CHECKPOINT)
    stage = HyperStage.of(open_folder(RETIRED))
    assert stage is not None
    analysis = HyperAnalysis(model)
    weights = writer.hs_weights(model)
    stats, _ = writer.calibrate(analysis, weights, stage.program.input_range, crops=1)
    b, _ = hyperprior_ptq.quantise(
        weights, stats, analysis.z_medians, stage.program.input_range, PROFILE
    )
    program_json, blob = b.program_json("x3", stage.program.output_channels), b.weights()
    program = load_program(program_json, blob)
    _one_plane(program)
    assert hashlib.sha256(program_json + blob).hexdigest() == ONE_CROP


def test_the_retired_h_s_needs_two_planes_and_two_digits() -> None:
    rows = units(RETIRED)
    assert [(r["planes"], r["digits"]) for r in rows[:-1]] == [(2, 2)] * 3
    assert rows[-1]["float32_exact"] is False and rows[-1]["per_mac"] > 3


@pytest.fixture(scope="module")
def units_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("units") / "set"
    argv = ["--out", str(out), "--profile", "int8-units"]
    assert writer.main(argv) == 0
    return out


@pytest.mark.slow
def test_the_writer_gives_the_pinned_int8_units_set(units_set: Path) -> None:
    manifest = Manifest.from_bytes((units_set / "set.json").read_bytes())
    assert manifest.name == "bmshj2018-hyperprior-int8-units-demo-q3"
    facts = json.loads((units_set / "set.json").read_bytes())["facts"]["hyperprior"]
    assert facts["quantisation"]["profile"] == {"int8-units": vars(PROFILE)}
    assert facts["quantisation"]["activation_max"] == PROFILE.act
    stage = HyperStage.of(open_folder(units_set))
    assert stage is not None
    _one_plane(stage.program)
    # the same tables, scale-index thresholds and main synthesis as the retired set: only h_s
    # differs (and the payload h_s's indexes code)
    for name in ("cdfs_z_q3.json", "gaussian_q3.json", "scale_index.json", "decoder.onnx"):
        assert (units_set / name).read_bytes() == (RETIRED / name).read_bytes()
    assert manifest.digest == SET_DIGEST
    # the bundled set, byte for byte, and the corpus written from it
    got, want = _files(units_set), _files(BUNDLED)
    assert sorted(got) == sorted(want)
    assert [name for name in want if got[name] != want[name]] == []


@pytest.mark.slow
def test_the_corpus_is_written_from_it(units_set: Path, tmp_path: Path) -> None:
    corpus = hyperprior_conformance.write_corpus(tmp_path, units_set, log=lambda _m: None)
    bundled = _files(hyperprior_conformance.corpus_dir())
    bundled.pop("README.md")
    assert _files(tmp_path) == bundled
    assert corpus["set"] == SET_DIGEST and len(corpus["payloads"]) >= 4
    # the same symbols as the retired set's corpus pinned: h_s changes the payloads' bytes only
    assert {p["name"]: p["symbols_digest"] for p in corpus["payloads"]} == RETIRED_SYMBOLS


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_its_h_s_is_exact_with_1_and_2_threads(units_set: Path, threads: int) -> None:
    result = run_check(
        "--engine", "int8-graph", "--payloads", "--threads", str(threads),
        "--hyper-set", str(units_set),
    )  # fmt: skip
    assert result["ok"] and result["checks"] == {"edge-16-bit-pairs": True, "hyperprior-h_s": True}


@pytest.mark.slow
@pytest.mark.parametrize("cpu", EMULATED)
def test_its_h_s_is_exact_on_emulated_older_cpus(units_set: Path, cpu: str) -> None:
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-user is not installed (apt-get install qemu-user): no emulated CPUs")
    if platform.machine() != "x86_64":
        pytest.skip("the emulated CPU models are x86-64 ones; this machine is not x86-64")
    result = run_check(
        "--engine", "int8-graph", "--payloads", "--threads", "2",
        "--hyper-set", str(units_set), cpu=cpu,
    )  # fmt: skip
    assert result["ok"], (cpu, result["checks"])
