"""``wai-dispatch paths`` and ``wai-dispatch plan`` through :func:`cli.main.main`, and the
registry behind them: what this machine really has (Core ML absent off macOS, ONNX Runtime
on the CPU where it imports), and a plan read from an injected Core ML runtime."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.dispatch import CPU_ONNX_RUNTIME, CPU_WAI_OPS, NPU_MODEL_RUNTIME, REFERENCE_OFFER
from wai_dispatch.dispatch.offer import GPU_ONNX_RUNTIME, GPU_WGSL
from wai_dispatch.paths import registry
from wai_dispatch.paths.coreml import CoreMLAdapter, ScriptedCoreML

OFF_MACOS = pytest.mark.skipif(sys.platform == "darwin", reason="checks the absence off macOS")
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None
SHAPE = [1, 192, 16, 16]
FACTS = {
    "programs": {
        "model-runtime": {
            "file": "decoder.mlmodel",
            "weights": "decoder.weight.bin",
            "input": "latent",
            "output": "x_hat",
            "latent_shape": SHAPE,
            "operations": 21,
        }
    }
}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def set_dir(tmp_path: Path) -> Path:
    """A bmshj2018 set holding a Core ML program (a specification with the fixed input)."""
    from wai_dispatch.codec.sets import write_manifest

    model_pb2 = pytest.importorskip("coremltools.proto.Model_pb2")
    spec = model_pb2.Model()
    spec.specificationVersion = 8
    feature = spec.description.input.add()
    feature.name = "latent"
    feature.type.multiArrayType.shape.extend(SHAPE)
    feature.type.multiArrayType.dataType = model_pb2.ArrayFeatureType.FLOAT16
    root = tmp_path / "set"
    root.mkdir()
    (root / "decoder.mlmodel").write_bytes(spec.SerializeToString())
    (root / "decoder.weight.bin").write_bytes(b"\x00\x01" * 512)
    (root / "wai-usage.json").write_text('{"licence": "test"}')
    write_manifest(
        root, name="bmshj2018-test", capability="wai.neural.bmshj2018", version="1", facts=FACTS
    )
    return root


@pytest.fixture
def scripted_npu(monkeypatch: pytest.MonkeyPatch) -> ScriptedCoreML:
    """The registry's adapters, with Core ML driven by a scripted runtime."""
    runtime = ScriptedCoreML()
    adapters = {**registry.known_adapters(), NPU_MODEL_RUNTIME: CoreMLAdapter(runtime)}
    monkeypatch.setattr(registry, "known_adapters", lambda: dict(adapters))
    return runtime


# --- the registry -------------------------------------------------------------------------------


def test_known_adapters_are_built_once() -> None:
    first, second = registry.known_adapters(), registry.known_adapters()
    assert {NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME, GPU_ONNX_RUNTIME, CPU_WAI_OPS, GPU_WGSL} <= set(
        first
    )
    assert all(first[p] is second[p] for p in first)
    assert all(adapter.path == path for path, adapter in first.items())


def test_default_offer_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from wai_dispatch.service.settings import load

    monkeypatch.delenv("WAI_OFFER", raising=False)
    assert load().decoder_args()["offer"] is None  # the decoder's rule decides
    monkeypatch.setenv("WAI_OFFER", " cpu/onnx-runtime/float , npu/model-runtime/float")
    assert load().decoder_args()["offer"] == (CPU_ONNX_RUNTIME, NPU_MODEL_RUNTIME)


@OFF_MACOS
def test_probe_says_why_each_path_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAI_OFFER", raising=False)
    rows = {row.path: row for row in registry.probe()}
    assert list(rows) == list(REFERENCE_OFFER)
    npu = rows[NPU_MODEL_RUNTIME]
    assert npu.present is False and "macOS 14.4" in str(npu.reason)
    assert rows[CPU_WAI_OPS] == (CPU_WAI_OPS, True, None)
    (wgsl,) = registry.probe([GPU_WGSL])  # present where a WebGPU adapter is, else why not
    found = registry.known_adapters()[GPU_WGSL]
    assert wgsl == (GPU_WGSL, found.unit_present(), found.absent_reason())
    assert rows[CPU_ONNX_RUNTIME].present is HAS_ORT


# --- wai-dispatch paths -------------------------------------------------------------------------


@OFF_MACOS
def test_paths_text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAI_OFFER", raising=False)
    status, out, _ = cli(capsys, "paths")
    assert status == 0
    lines = out.splitlines()  # the offer first, then the paths it leaves out
    assert [line.split()[0] for line in lines][: len(REFERENCE_OFFER)] == [
        str(p) for p in REFERENCE_OFFER
    ]
    assert "absent" in lines[0] and "Core ML needs macOS 14.4 or later; this is Linux" in lines[0]
    assert ("present" in lines[1]) is HAS_ORT
    assert lines[2].split()[1] == "present"


@OFF_MACOS
def test_paths_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAI_OFFER", "gpu/wgsl/integer,cpu/onnx-runtime/float")
    status, out, _ = cli(capsys, "paths", "--json")
    assert status == 0
    obj = json.loads(out)
    assert obj["offer"] == ["gpu/wgsl/integer", "cpu/onnx-runtime/float"]
    wgsl, onnx = [row for row in obj["paths"] if row["offered"]]
    assert wgsl["path"] == {"unit": "gpu", "backend": "wgsl", "arithmetic": "integer"}
    found = registry.known_adapters()[GPU_WGSL]
    reason = registry.absent_reason(found) if not found.unit_present() else None
    assert wgsl["present"] is (reason is None) and wgsl["reason"] == reason
    if reason is None:  # the WebGPU adapter it found, and where its type puts the operations
        device = wgsl["device"]
        assert device["adapter_type"] and device["backend_type"]
        units = {"CPU": "cpu", "DiscreteGPU": "gpu", "IntegratedGPU": "gpu"}
        assert device["operations_on"] == units.get(device["adapter_type"], "unknown")
    else:
        assert wgsl["device"] is None
    assert onnx["present"] is HAS_ORT and (onnx["reason"] is None) is HAS_ORT

    status, out, _ = cli(capsys, "paths", "--json", "--offer", "npu/model-runtime/float")
    (npu,) = [row for row in json.loads(out)["paths"] if row["offered"]]
    assert npu["present"] is False and "macOS" in npu["reason"]


def test_paths_refuses_a_malformed_offer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAI_OFFER", "npu/model-runtime/float,npu/model-runtime/float")
    status, _, err = cli(capsys, "paths")
    assert status == 2 and "invalid_offer" in err
    status, _, err = cli(capsys, "paths", "--offer", "npu/wai-ops/integer")
    assert status == 2 and "invalid_offer" in err


@pytest.mark.parametrize("command", ["explain", "paths"])
def test_an_impossible_path_is_refused_by_the_offer_flag_and_setting(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Issue 29: ``explain --offer cpu/wai-ops/float`` (once the ``explain --help`` example)
    and ``WAI_OFFER`` with it are one typed line naming the table's rule."""
    status, out, err = cli(capsys, command, "--offer", "cpu/wai-ops/float")
    assert status == 2 and out == ""
    first = err.splitlines()[0]
    assert first.startswith("wai-dispatch: error: ") and first.endswith(
        "invalid_offer: path cpu/wai-ops/float: wai-ops computes in integer, not float (§1)"
    )
    monkeypatch.setenv("WAI_OFFER", "npu/model-runtime/float,gpu/onnx-runtime/integer")
    status, _, err = cli(capsys, "paths")
    assert status == 2 and "onnx-runtime computes in float, not integer (§1)" in err


def test_the_explain_help_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out, _ = capsys.readouterr()
    example = next(line for line in out.splitlines() if "explain --offer" in line)
    status, out, _ = cli(capsys, *example.split("wai-dispatch", 1)[1].split())
    assert status == 0 and json.loads(out)


# --- wai-dispatch plan --------------------------------------------------------------------------


@OFF_MACOS
def test_plan_on_linux_is_unit_absent(capsys: pytest.CaptureFixture[str], set_dir: Path) -> None:
    # asked by name: by default `plan` asks the first present path of the offer
    argv = ("plan", "--set-dir", str(set_dir), "--path", str(NPU_MODEL_RUNTIME), "--json")
    status, out, _ = cli(capsys, *argv)
    assert status == 1
    obj = json.loads(out)
    assert obj["path"] == NPU_MODEL_RUNTIME.to_json()
    assert obj["capability"] == "wai.neural.bmshj2018"
    assert obj["latent_shape"] == SHAPE
    assert obj["placement"] is None
    assert obj["refused"]["reason"] == "dispatch_unit_absent"
    assert "macOS 14.4" in obj["refused"]["message"]


def test_plan_reads_the_placement(
    capsys: pytest.CaptureFixture[str], set_dir: Path, scripted_npu: ScriptedCoreML
) -> None:
    scripted_npu.plan_rows = [("const", None)] * 10 + [("conv", "MLNeuralEngineComputeDevice")] * 21
    status, out, _ = cli(capsys, "plan", "--set-dir", str(set_dir), "--json")
    assert status == 0
    obj = json.loads(out)
    assert obj["placement"] == {"npu": 21, "gpu": 0, "cpu": 0, "unknown": 0}
    assert obj["refused"] is None
    assert "predict" not in scripted_npu.calls  # a plan, not a decode

    status, out, _ = cli(capsys, "plan", "--set-dir", str(set_dir))
    assert status == 0 and "npu=21" in out and "latent 1×192×16×16" in out


def test_plan_not_placed(
    capsys: pytest.CaptureFixture[str], set_dir: Path, scripted_npu: ScriptedCoreML
) -> None:
    scripted_npu.plan_rows = [("conv", "MLCPUComputeDevice")] * 21
    status, out, _ = cli(capsys, "plan", "--set-dir", str(set_dir), "--json")
    obj = json.loads(out)
    assert status == 1
    assert obj["refused"]["reason"] == "dispatch_not_placed"
    assert obj["placement"] == {"npu": 0, "gpu": 0, "cpu": 21, "unknown": 0}


def test_plan_shape_mismatch_and_backend_failure(
    capsys: pytest.CaptureFixture[str], set_dir: Path, scripted_npu: ScriptedCoreML
) -> None:
    argv = ("plan", "--set-dir", str(set_dir), "--json")
    status, out, _ = cli(capsys, *argv, "--latent-shape", "1,192,32,48")
    assert status == 1 and json.loads(out)["refused"]["reason"] == "dispatch_shape_mismatch"
    scripted_npu.fails = "compile"
    status, out, _ = cli(capsys, *argv)
    refused = json.loads(out)["refused"]
    assert status == 1 and refused["reason"] == "dispatch_backend_failed"
    assert "compil" in refused["message"]


def test_plan_applies_section_3_first(capsys: pytest.CaptureFixture[str], set_dir: Path) -> None:
    status, out, _ = cli(capsys, "plan", "--set-dir", str(set_dir), "--path", str(CPU_WAI_OPS))
    assert status == 1 and "dispatch_arithmetic_mismatch" in out


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed")
def test_plan_onnx_without_its_program(capsys: pytest.CaptureFixture[str], set_dir: Path) -> None:
    # The set holds only the Core ML program; the latent shape comes from the set's facts.
    argv = ("plan", "--set-dir", str(set_dir), "--path", str(CPU_ONNX_RUNTIME), "--json")
    status, out, _ = cli(capsys, *argv)
    obj = json.loads(out)
    assert status == 1 and obj["latent_shape"] == SHAPE
    assert obj["refused"]["reason"] == "dispatch_program_absent"


def test_plan_from_the_store(
    capsys: pytest.CaptureFixture[str],
    set_dir: Path,
    tmp_path: Path,
    scripted_npu: ScriptedCoreML,
) -> None:
    from wai_dispatch.codec.sets import SetStore

    data = tmp_path / "data"
    installed = SetStore(data / "sets").install(set_dir)
    scripted_npu.plan_rows = [("conv", "MLNeuralEngineComputeDevice")] * 15 + [
        ("mul", "MLGPUComputeDevice")
    ] * 6
    argv = ("plan", "--data-dir", str(data), "--json")
    status, out, _ = cli(capsys, *argv, "--set", installed.digest[:12])
    obj = json.loads(out)
    assert status == 0 and obj["set"] == installed.digest
    assert obj["placement"] == {"npu": 15, "gpu": 6, "cpu": 0, "unknown": 0}


def test_plan_errors_are_typed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = cli(capsys, "plan", "--set-dir", str(tmp_path))
    assert status == 2 and "set_file_missing" in err
    status, _, err = cli(capsys, "plan", "--data-dir", str(tmp_path), "--set", "zz")
    assert status == 2 and "set_digest_invalid" in err


def test_plan_without_a_latent_shape_asks_for_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from wai_dispatch.codec.sets import write_manifest

    root = tmp_path / "bare"
    root.mkdir()
    (root / "wai-usage.json").write_text("{}")
    write_manifest(root, name="bare", capability="wai.neural.bmshj2018", version="1", facts={})
    status, _, err = cli(capsys, "plan", "--set-dir", str(root), "--path", "cpu/onnx-runtime/float")
    assert status == 2 and "--latent-shape" in err


@pytest.mark.skipif(not HAS_ORT, reason="needs onnxruntime")
def test_plan_onnx_runtime_counts_the_programs_operations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """§5: the bundled set's program has 16 operations, all placed on the CPU; the nodes of
    the graph ONNX Runtime runs are shown beside it, outside the placement."""
    argv = ("plan", "--path", "cpu/onnx-runtime/float", "--data-dir", str(tmp_path))
    status, out, _ = cli(capsys, *argv, "--json")
    obj = json.loads(out)
    assert status == 0
    assert obj["placement"] == {"npu": 0, "gpu": 0, "cpu": 16, "unknown": 0}
    assert obj["runtime_nodes"]["cpu"] > 16 and set(obj["runtime_nodes"]) == set(obj["placement"])
    status, out, _ = cli(capsys, *argv)
    assert status == 0 and "cpu=16" in out and "runtime_nodes" not in out
