"""The ``gpu/wgsl/integer`` adapter against §4 and §5: absent without a WebGPU adapter (with
the reason), ``dispatch_not_placed`` on a software (CPU-type) adapter with the decode moving on
to the interpreter with the same bits, ``dispatch_shape_mismatch`` before anything runs,
``dispatch_backend_failed`` with the cause kept, and recovery on the next decode."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from wai_dispatch.dispatch import CPU_WAI_OPS, BackendFailed, Code, Tier, choose
from wai_dispatch.dispatch.offer import GPU_WGSL
from wai_dispatch.dispatch.registry import INT_SYNTH
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.paths.tiling import DEFAULT_TILE_BYTES
from wai_dispatch.setfacts.facts import SetFacts

pytest.importorskip("wgpu", reason="wgpu (wgpu-py) is not installed: pip install wgpu")

from wai_dispatch.paths.wgsl.adapter import WgslAdapter
from wai_dispatch.paths.wgsl.runner import Runner, UnitAbsent


@pytest.fixture(scope="module")
def device(wgpu_device: Runner) -> Runner:
    return wgpu_device  # tests/paths/conftest.py


def absent() -> Runner:
    raise UnitAbsent("no WebGPU adapter (no Vulkan/Metal/D3D12 driver?): scripted")


def test_no_adapter_is_unit_absent_with_the_reason() -> None:
    adapter = WgslAdapter(acquire=absent)
    assert adapter.unit_present() is False
    assert "no Vulkan/Metal/D3D12 driver" in str(adapter.absent_reason())
    assert adapter.device() is None
    decision = choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, [GPU_WGSL], {GPU_WGSL: adapter})
    assert decision.report.refused[0].reason is Code.UNIT_ABSENT
    with pytest.raises(BackendFailed, match="no WebGPU adapter"):
        adapter.run(None)


def test_a_shader_that_does_not_compile_is_backend_failed_with_the_cause(device: Runner) -> None:
    with pytest.raises(BackendFailed, match="does not compile") as info:
        device.pipeline("@compute @workgroup_size(1) fn main() { let x: i32 = 1.5; }")
    assert info.value.__cause__ is not None


# --- with the interpreter's program loader (paths/waiops, issue 8) -----------------------------


@dataclass
class MemorySet:
    """A parameter set's verified files, in memory (``paths.job.SetFiles``)."""

    files: dict[str, bytes]
    digest: str = "ab" * 32
    facts: SetFacts = field(
        default_factory=lambda: SetFacts.model_validate(
            {"programs": {"wai-ops": {"file": "p.json", "weights": "w.safetensors"}}}
        )
    )

    def has(self, name: str) -> bool:
        return name in self.files

    def read(self, name: str) -> bytes:
        return self.files[name]


@dataclass(frozen=True)
class Job:
    """What the pipeline hands a path: the set and the decode's integer symbols."""

    set_files: MemorySet
    symbols: np.ndarray
    latent: np.ndarray | None = None
    tile_bytes: int = DEFAULT_TILE_BYTES  # the decoder's budget, as every SynthesisJob carries
    waiops_engine: str = "auto"  # the decoder's wai-ops engine, as every SynthesisJob carries


@pytest.fixture
def job() -> Job:
    from wai_dispatch.paths.waiops import build

    rng = np.random.default_rng(3)
    b = build.ProgramBuilder("x", 3, (-20, 20))
    b.add(
        "conv_transpose2d",
        "d1",
        ["x"],
        "a",
        {"kernel": 3, "stride": 2, "padding": 1, "output_padding": 1},
        {
            "weight": rng.integers(-90, 90, (3, 3, 3, 3)).astype(np.int8),
            "bias": rng.integers(-500, 500, 3).astype(np.int32),
        },
    )
    params = {
        "multiplier": np.array([3, 5, 7], np.int32),
        "shift": np.array([6, 7, 8], np.int32),
    }
    b.add("requantize", "rq", ["a"], "rgb", {"clamp": [0, 255]}, params)
    files = {"p.json": b.program_json("rgb", 3), "w.safetensors": b.weights()}
    return Job(MemorySet(files), rng.integers(-20, 21, (1, 3, 5, 7)).astype(np.int32))


def sha(rgb: np.ndarray) -> str:
    return hashlib.sha256(np.rint(rgb * 255).astype(np.uint8).tobytes()).hexdigest()


def test_a_cpu_adapter_is_not_placed_and_the_decode_moves_on_with_the_same_bits(
    device: Runner, job: Job
) -> None:
    from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter

    wgsl = WgslAdapter(acquire=lambda: device)
    assert wgsl.unit_present() and wgsl.program_present(job) and wgsl.takes_shape(job)
    operations = 2
    if device.adapter_type == "CPU":  # lavapipe: every operation on the CPU (§5)
        assert wgsl.plan(job) == Placement(cpu=operations)
        assert wgsl.device()["operations_on"] == "cpu"  # type: ignore[index]
    offer = [GPU_WGSL, CPU_WAI_OPS]
    adapters = {GPU_WGSL: wgsl, CPU_WAI_OPS: WaiOpsAdapter()}
    decision = choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, offer, adapters, job)
    if device.adapter_type == "CPU":
        assert [(r.path, r.reason) for r in decision.report.refused] == [
            (GPU_WGSL, Code.NOT_PLACED)
        ]
        assert decision.ran == CPU_WAI_OPS
    else:  # a real GPU holds decode-equivalence itself
        assert decision.ran == GPU_WGSL
    # the kernels give the interpreter's bits: the same picture, the same hash
    assert sha(wgsl.run(job)) == sha(decision.output)
    np.testing.assert_array_equal(wgsl.run(job), WaiOpsAdapter().run(job))


def test_the_placement_is_the_adapter_type(device: Runner, job: Job) -> None:
    for kind, unit in (("DiscreteGPU", "gpu"), ("IntegratedGPU", "gpu"), ("CPU", "cpu")):
        runner = Runner(device._adapter, device._device)
        runner.info["adapter_type"] = kind  # the type is all the placement reads
        assert WgslAdapter(acquire=lambda r=runner: r).plan(job) == Placement(**{unit: 2})


def test_a_shape_over_the_device_limits_is_refused_before_anything_runs(
    device: Runner, job: Job
) -> None:
    runner = Runner(device._adapter, device._device)
    runner.limits["maxComputeInvocationsPerWorkgroup"] = 32  # below the kernels' 64
    submitted: list[Any] = []
    runner.dispatch = lambda *a: submitted.append(a)  # type: ignore[method-assign]
    wgsl = WgslAdapter(acquire=lambda: runner)
    decision = choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, [GPU_WGSL], {GPU_WGSL: wgsl}, job)
    assert decision.report.refused[0].reason is Code.SHAPE_MISMATCH
    assert "maxComputeInvocationsPerWorkgroup 64 > 32" in str(wgsl.last_refusal)
    assert submitted == []
    wrong = Job(job.set_files, job.symbols[:, :2])  # two channels, the program takes three
    assert WgslAdapter(acquire=lambda: device).takes_shape(wrong) is False


class Flaky(Runner):
    """A device whose first dispatch fails as a lost device would."""

    failures = 1

    def dispatch(self, *args: Any) -> None:
        if Flaky.failures:
            Flaky.failures -= 1
            raise BackendFailed("wgsl: the dispatch failed: device lost") from RuntimeError("lost")
        super().dispatch(*args)


def test_a_failed_device_is_dropped_and_the_next_decode_recovers(device: Runner, job: Job) -> None:
    acquired: list[Runner] = []

    def acquire() -> Runner:
        acquired.append(Flaky(device._adapter, device._device))
        return acquired[-1]

    wgsl = WgslAdapter(acquire=acquire)
    decision = choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, [GPU_WGSL], {GPU_WGSL: wgsl}, job)
    if device.adapter_type == "CPU":  # not placed: run the path directly to see the failure
        with pytest.raises(BackendFailed, match="device lost") as info:
            wgsl.run(job)
        assert isinstance(info.value.__cause__, RuntimeError)
    else:
        assert decision.report.refused[0].reason is Code.BACKEND_FAILED
    out = wgsl.run(job)  # the next decode: a fresh device, the same bits
    assert len(acquired) == 2
    from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter

    np.testing.assert_array_equal(out, WaiOpsAdapter().run(job))


def test_symbols_outside_the_declared_range_are_refused_before_the_kernels(
    device: Runner, job: Job
) -> None:
    from wai_dispatch.paths.waiops.errors import InputOutOfRange

    submitted: list[Any] = []
    runner = Runner(device._adapter, device._device)
    runner.dispatch = lambda *a: submitted.append(a)  # type: ignore[method-assign]
    wild = job.symbols.copy()
    wild[0, 0, 0, 0] = 21  # the program declares [-20, 20]
    with pytest.raises(InputOutOfRange, match="outside the program's declared range"):
        WgslAdapter(acquire=lambda: runner).run(Job(job.set_files, wild))
    assert submitted == []


def test_the_int_synth_envelope_offered_wgsl_first(device: Runner, tmp_path: Any) -> None:
    """The bundled int-synth envelope through the decode pipeline with the offer
    ``gpu/wgsl/integer, cpu/wai-ops/integer``: on a CPU adapter the WGSL path is refused with
    ``dispatch_not_placed`` and the interpreter decodes to the corpus hash; on a GPU the WGSL
    path decodes to that same hash."""
    import json

    from wai_dispatch.codec.envelope import Envelope
    from wai_dispatch.codec.sets import Manifest, SetStore
    from wai_dispatch.conformance import neural_conformance_dir, sets_dir
    from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.decoding.results import rgb_digest

    folder = sets_dir() / "int-synth-int8-units-demo-q3"
    store = SetStore(tmp_path / "sets")
    store.install(folder)
    manifest = Manifest.from_bytes((folder / "set.json").read_bytes())
    envelope = Envelope(
        capability=manifest.capability,
        payload=(folder / "payload.bin").read_bytes(),
        set=manifest.digest,
    )
    adapters = {GPU_WGSL: WgslAdapter(acquire=lambda: device), CPU_WAI_OPS: WaiOpsAdapter()}
    result = Decoder(store, (GPU_WGSL, CPU_WAI_OPS), adapters).decode(envelope)
    (report,) = result.reports
    assert report.ran is not None
    if device.adapter_type == "CPU":
        assert [(r.path, r.reason) for r in report.refused] == [(GPU_WGSL, Code.NOT_PLACED)]
        assert report.ran.path == CPU_WAI_OPS
    else:
        assert report.ran.path == GPU_WGSL and report.ran.placement == Placement(gpu=12)
    assert report.ran.tier is Tier.DECODE_EQUIVALENCE
    corpus = json.loads((neural_conformance_dir() / "corpus.json").read_bytes())
    coffee = next(p for p in corpus["payloads"] if p["name"] == "coffee-256x256")
    assert rgb_digest(result.rgb) == coffee["rgb8_blake3"]
