"""The Core ML path (§6.1) on any machine: §4's questions, the package the set's bytes are
placed in, and the compute plan read into a placement (§5), with an injected runtime. The
unit-absent test runs the real check, with nothing injected."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.dispatch import (
    BMSHJ2018,
    CPU_ONNX_RUNTIME,
    NPU_MODEL_RUNTIME,
    BackendFailed,
    Code,
    Placement,
    ScriptedAdapter,
    Tier,
    choose,
)
from wai_dispatch.paths.coreml import (
    CoreMLAdapter,
    ScriptedCoreML,
    _Compiled,
    coreml_absent_reason,
)
from wai_dispatch.paths.coreml_set import placement_from_plan, program_shape, write_package
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.lru import LRU, Programs

SHAPE = (1, 192, 16, 16)
FACTS = {
    "programs": {
        "model-runtime": {
            "file": "decoder.mlmodel",
            "weights": "decoder.weight.bin",
            "input": "latent",
            "output": "x_hat",
            "latent_shape": list(SHAPE),
            "operations": 21,
        }
    }
}
WEIGHTS = bytes(range(256)) * 9 + b"\x00tail"


def spec_bytes(shape: tuple[int, ...] = SHAPE) -> bytes:
    """A minimal ML Program specification with one float16 input ``latent`` of ``shape``."""
    model_pb2 = pytest.importorskip("coremltools.proto.Model_pb2")
    spec = model_pb2.Model()
    spec.specificationVersion = 8
    feature = spec.description.input.add()
    feature.name = "latent"
    feature.type.multiArrayType.shape.extend(shape)
    feature.type.multiArrayType.dataType = model_pb2.ArrayFeatureType.FLOAT16
    out = spec.description.output.add()
    out.name = "x_hat"
    out.type.multiArrayType.dataType = model_pb2.ArrayFeatureType.FLOAT16
    spec.mlProgram.version = 1
    data: bytes = spec.SerializeToString()
    return data


def a_set(files: dict[str, bytes], facts: Mapping[str, Any] = FACTS) -> LoadedSet:
    """An opened set held in memory (the one in-memory set of the tests)."""
    return LoadedSet.from_files(files, facts=facts)


def full_set(**kw: Any) -> LoadedSet:
    return a_set({"decoder.mlmodel": spec_bytes(), "decoder.weight.bin": WEIGHTS}, **kw)


def job(set_files: LoadedSet, shape: tuple[int, ...] = SHAPE) -> SynthesisJob:
    return SynthesisJob(set_files, np.zeros(shape, np.float32))


def ops(n: int, device: str | None, *, consts: int = 0) -> list[tuple[str, str | None]]:
    rows: list[tuple[str, str | None]] = [("const", None)] * consts
    return rows + [("conv_transpose", device)] * n


# --- the real check, nothing injected ---------------------------------------------------------


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the absence off macOS")
def test_unit_absent_off_macos_with_the_reason() -> None:
    adapter = CoreMLAdapter()
    assert adapter.path == NPU_MODEL_RUNTIME
    assert adapter.unit_present() is False
    reason = adapter.absent_reason()
    assert reason is not None and "macOS 14.4" in reason


def test_each_absent_reason() -> None:
    def importer(missing: str) -> Any:
        def imp(name: str) -> object:
            if name == missing:
                raise ImportError(f"No module named {name!r}")
            return object() if name == "coremltools" else type("M", (), {"_MLModelProxy": 1})

        return imp

    assert coreml_absent_reason("Linux", "") == "Core ML needs macOS 14.4 or later; this is Linux"
    assert "this is macOS 14.3.1" in str(coreml_absent_reason("Darwin", "14.3.1"))
    assert (
        coreml_absent_reason("Darwin", "15.0", importer("coremltools"))
        == "coremltools is not installed"
    )
    reason = coreml_absent_reason("Darwin", "14.4", importer("coremltools.libcoremlpython"))
    assert reason is not None and "native runtime" in reason
    assert coreml_absent_reason("Darwin", "27.2", importer("none")) is None


# --- §5: placement from the compute plan -------------------------------------------------------


def test_placement_counts_devices_and_leaves_constants_out() -> None:
    rows = [
        ("const", "MLCPUComputeDevice"),
        ("conv", "MLNeuralEngineComputeDevice"),
        ("mul", "MLGPUComputeDevice"),
        ("sqrt", "MLCPUComputeDevice"),
        ("add", None),
        ("cast", "cpu"),
        ("real_div", "SomeFutureDevice"),
    ]
    assert placement_from_plan(rows) == Placement(npu=1, gpu=1, cpu=2, unknown=2)
    assert placement_from_plan([]) == Placement()


def test_everything_on_the_neural_engine_runs_there() -> None:
    runtime = ScriptedCoreML(ops(21, "MLNeuralEngineComputeDevice", consts=30))
    adapter = CoreMLAdapter(runtime)
    decision = choose(
        BMSHJ2018, Tier.NONE, (NPU_MODEL_RUNTIME,), {NPU_MODEL_RUNTIME: adapter}, job(full_set())
    )
    assert decision.ran == NPU_MODEL_RUNTIME
    assert decision.report.ran is not None
    assert decision.report.ran.placement == Placement(npu=21)
    assert decision.output.dtype == np.float32 and decision.output.shape == (1, 3, 256, 256)
    assert runtime.calls == ["compile", "load", "plan", "predict"]


def test_nothing_on_the_neural_engine_is_not_placed_and_the_next_path_runs() -> None:
    adapter = CoreMLAdapter(ScriptedCoreML(ops(21, "MLCPUComputeDevice")))
    cpu = ScriptedAdapter(CPU_ONNX_RUNTIME, output="cpu")
    decision = choose(
        BMSHJ2018,
        Tier.NONE,
        (NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME),
        {NPU_MODEL_RUNTIME: adapter, CPU_ONNX_RUNTIME: cpu},
        job(full_set()),
    )
    assert [(r.path, r.reason) for r in decision.report.refused] == [
        (NPU_MODEL_RUNTIME, Code.NOT_PLACED)
    ]
    assert decision.ran == CPU_ONNX_RUNTIME and decision.output == "cpu"


def test_a_mixed_plan_is_reported_as_it_is() -> None:
    rows = ops(15, "MLNeuralEngineComputeDevice", consts=4) + ops(6, "MLCPUComputeDevice")
    adapter = CoreMLAdapter(ScriptedCoreML(rows))
    decision = choose(
        BMSHJ2018, Tier.NONE, (NPU_MODEL_RUNTIME,), {NPU_MODEL_RUNTIME: adapter}, job(full_set())
    )
    assert decision.report.ran is not None
    assert decision.report.ran.placement == Placement(npu=15, cpu=6)
    decision.report.validate()


def test_compiled_once_per_set_digest() -> None:
    runtime = ScriptedCoreML(ops(21, "npu"))
    adapter = CoreMLAdapter(runtime)
    one = full_set()
    for _ in range(3):
        adapter.plan(job(one))
        adapter.run(job(one))
    assert runtime.calls.count("compile") == 1 and runtime.calls.count("predict") == 3
    other = a_set({**one.files, "decoder.weight.bin": WEIGHTS[::-1]})  # another digest
    assert other.digest != one.digest
    adapter.plan(job(other))
    assert runtime.calls.count("compile") == 2
    adapter.close()


# --- §4's other questions -----------------------------------------------------------------------


def test_shape_mismatch() -> None:
    adapter = CoreMLAdapter(ScriptedCoreML(ops(21, "npu")))
    assert adapter.takes_shape(job(full_set())) is True
    assert adapter.takes_shape(job(full_set(), (1, 192, 32, 48))) is False
    decision = choose(
        BMSHJ2018,
        Tier.NONE,
        (NPU_MODEL_RUNTIME,),
        {NPU_MODEL_RUNTIME: adapter},
        job(full_set(), (1, 192, 32, 48)),
    )
    assert decision.report.refused[0].reason is Code.SHAPE_MISMATCH


def test_shape_is_read_from_the_program_not_the_facts() -> None:
    facts = json.loads(json.dumps(FACTS))
    facts["programs"]["model-runtime"]["latent_shape"] = [1, 192, 32, 48]
    assert program_shape(full_set(facts=facts)) == SHAPE


def test_shape_falls_back_to_the_facts_without_a_specification() -> None:
    facts = json.loads(json.dumps(FACTS))
    files = a_set({"decoder.weight.bin": WEIGHTS}, facts=facts)
    assert program_shape(files) == SHAPE


def test_a_corrupt_specification_is_a_backend_failure() -> None:
    pytest.importorskip("coremltools.proto.Model_pb2")
    adapter = CoreMLAdapter(ScriptedCoreML())
    broken = a_set({"decoder.mlmodel": b"\xff\x00not protobuf", "decoder.weight.bin": WEIGHTS})
    with pytest.raises(BackendFailed):
        adapter.takes_shape(job(broken))


@pytest.mark.parametrize("missing", ["decoder.mlmodel", "decoder.weight.bin"])
def test_program_absent(missing: str) -> None:
    whole = {"decoder.mlmodel": spec_bytes(), "decoder.weight.bin": WEIGHTS}
    files = a_set({n: d for n, d in whole.items() if n != missing})
    adapter = CoreMLAdapter(ScriptedCoreML(ops(21, "npu")))
    assert adapter.program_present(job(files)) is False
    decision = choose(
        BMSHJ2018, Tier.NONE, (NPU_MODEL_RUNTIME,), {NPU_MODEL_RUNTIME: adapter}, job(files)
    )
    assert decision.report.refused[0].reason is Code.PROGRAM_ABSENT


def test_program_files_follow_the_facts() -> None:
    facts = {"programs": {"model-runtime": {"file": "a.mlmodel", "weights": "a.bin"}}}
    files = a_set({"a.mlmodel": b"", "a.bin": b""}, facts=facts)
    assert CoreMLAdapter(ScriptedCoreML()).program_present(job(files)) is True


@pytest.mark.parametrize("step", ["compile", "load", "plan", "predict"])
def test_backend_errors_become_backend_failed_with_the_cause(step: str) -> None:
    adapter = CoreMLAdapter(ScriptedCoreML(ops(21, "npu"), fails=step))
    with pytest.raises(BackendFailed) as info:
        adapter.plan(job(full_set()))
        adapter.run(job(full_set()))
    assert isinstance(info.value.__cause__, RuntimeError)
    decision = choose(
        BMSHJ2018,
        Tier.NONE,
        (NPU_MODEL_RUNTIME,),
        {NPU_MODEL_RUNTIME: CoreMLAdapter(ScriptedCoreML(ops(21, "npu"), fails=step))},
        job(full_set()),
    )
    assert decision.report.refused[0].reason is Code.BACKEND_FAILED


# --- the package (§6.1: the set's bytes, placed in a package of the sink's own) ---------------


def test_package_layout(tmp_path: Path) -> None:
    spec = b"\x08\x08spec-bytes"
    package = write_package(tmp_path, spec, WEIGHTS)
    assert package == tmp_path / "decoder.mlpackage"
    data = package / "Data" / "com.apple.CoreML"
    assert (data / "model.mlmodel").read_bytes() == spec
    assert (data / "weights" / "weight.bin").read_bytes() == WEIGHTS
    manifest = json.loads((package / "Manifest.json").read_text())
    assert manifest["fileFormatVersion"] == "1.0.0"
    entries = manifest["itemInfoEntries"]
    root = entries[manifest["rootModelIdentifier"]]
    assert root["path"] == "com.apple.CoreML/model.mlmodel" and root["name"] == "model.mlmodel"
    paths = {e["path"] for e in entries.values()}
    assert paths == {"com.apple.CoreML/model.mlmodel", "com.apple.CoreML/weights"}
    assert all(e["author"] == "com.apple.CoreML" for e in entries.values())


def test_the_runtime_gets_exactly_the_set_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = ScriptedCoreML(ops(21, "npu"))
    files = full_set()
    reads: list[str] = []
    read = LoadedSet.read

    def recorded(self: LoadedSet, name: str) -> bytes:
        reads.append(name)
        return read(self, name)

    monkeypatch.setattr(LoadedSet, "read", recorded)
    CoreMLAdapter(runtime).plan(job(files))
    (package,) = runtime.packages
    assert package["Data/com.apple.CoreML/model.mlmodel"] == files.files["decoder.mlmodel"]
    assert package["Data/com.apple.CoreML/weights/weight.bin"] == WEIGHTS
    assert "Manifest.json" in package
    assert sorted(reads) == ["decoder.mlmodel", "decoder.weight.bin"]


def test_close_removes_the_package() -> None:
    programs: Programs = LRU()
    adapter = CoreMLAdapter(ScriptedCoreML(ops(21, "npu")), programs=programs)
    adapter.plan(job(full_set()))
    (entry,) = programs.values()
    assert isinstance(entry, _Compiled)
    root = Path(entry.tmp.name)
    assert (root / "decoder.mlpackage" / "Manifest.json").is_file()
    adapter.close()
    assert not root.exists()


def test_run_feeds_float16_to_a_float16_program() -> None:
    seen: list[np.ndarray] = []

    class Recording(ScriptedCoreML):
        def predict(self, model: Any, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]:
            seen.append(inputs["latent"])
            return super().predict(model, inputs)

    adapter = CoreMLAdapter(Recording(ops(21, "npu")))
    latent = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE) % 7
    out = adapter.run(SynthesisJob(full_set(), latent))
    assert seen[0].dtype == np.float16 and np.array_equal(seen[0], latent)
    assert out.dtype == np.float32


def test_coremltools_is_a_runtime_dependency_on_macos_only() -> None:
    """A plain install on a Mac has the Core ML path's runtime; elsewhere it is not pulled in."""
    import tomllib

    from packaging.markers import Marker
    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "coremltools"]
    assert isinstance(req.marker, Marker)
    assert req.marker.evaluate({"sys_platform": "darwin"})
    assert not req.marker.evaluate({"sys_platform": "linux"})
