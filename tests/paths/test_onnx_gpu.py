"""``gpu/onnx-runtime/float``: its provider (CUDA, else the WebGPU plugin) found through ONNX
Runtime's real provider and device discovery (paths/onnx_path.py); a software adapter is
not a GPU, refused from its description with no session made; the default offer puts a
present hardware GPU after the neural processor.

Here (no GPU: this machine, CI) the path is absent, and the reason names both providers. Under
``WAI_REQUIRE_GPU=1`` (tools/gpu_check.sh, a borrowed GPU machine) the path must be present."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from wai_dispatch.dispatch import NPU_MODEL_RUNTIME, REFERENCE_OFFER, ScriptedAdapter, Unit
from wai_dispatch.dispatch.offer import GPU_ONNX_RUNTIME
from wai_dispatch.paths import onnx as onnx_path
from wai_dispatch.paths import registry
from wai_dispatch.paths.onnx import DeviceInfo, OnnxRuntimeAdapter, not_a_gpu

REQUIRE_GPU = os.environ.get("WAI_REQUIRE_GPU") == "1"


def test_gpu_path_as_discovery_finds_it() -> None:
    gpu = OnnxRuntimeAdapter(Unit.GPU)
    found = onnx_path.discover()
    if REQUIRE_GPU:
        assert gpu.unit_present(), f"WAI_REQUIRE_GPU=1 and {gpu.absent_reason()}"
    if found.chosen is None:  # this machine, CI: both providers said absent, with why
        assert not gpu.unit_present()
        reason = gpu.absent_reason() or ""
        assert reason.startswith("no GPU provider: ")
        assert "CUDAExecutionProvider: this onnxruntime" in reason
        assert "WebGpuExecutionProvider: the onnxruntime-ep-webgpu plugin" in reason
        assert gpu.device() == {"unit": "gpu"}
    else:  # a GPU machine: the provider and its device are stated
        assert gpu.unit_present() and gpu.absent_reason() is None
        assert gpu.device()["provider"] in (onnx_path.CUDA, onnx_path.WEBGPU)


_PROBE = """
import json
from wai_dispatch.paths import onnx as onnx_path
found = onnx_path.discover()
print(json.dumps({"chosen": found.chosen is not None, "reason": found.reason()}))
"""


def test_a_software_adapter_is_not_a_gpu() -> None:
    """The plugin offers its device on the CPU under ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1
    (lavapipe or SwiftShader would compute): discovery refuses it from its description. The
    probe makes no session (one on that device was seen to hang): it ends in seconds."""
    import importlib.util

    if importlib.util.find_spec("onnxruntime_ep_webgpu") is None:
        pytest.skip("the onnxruntime-ep-webgpu plugin is not installed (the webgpu extra)")
    env = {**os.environ, "ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if answer["chosen"]:  # a machine with CUDA or a hardware GPU chooses that instead
        return
    assert (
        "WebGpuExecutionProvider: the onnxruntime-ep-webgpu plugin offers only"
        in (answer["reason"])
    )
    assert "a software adapter, not a GPU" in answer["reason"]


def _device(kind: str, vendor: str, vendor_id: int, device_id: int = 0, **meta: str) -> DeviceInfo:
    return DeviceInfo(onnx_path.WEBGPU, kind, vendor, vendor_id, device_id, meta)


@pytest.mark.parametrize(
    ("device", "words"),
    [
        (_device("gpu", "Mesa", 0x10005), "llvmpipe/lavapipe"),
        (_device("gpu", "Google", 0x1AE0), "SwiftShader"),
        (_device("gpu", "Microsoft", 0x1414, 0x8C), "Basic Render Driver"),
        (_device("gpu", "", 0, Description="llvmpipe (LLVM 15.0.6, 256 bits)"), "llvmpipe"),
        (_device("cpu", "Intel", 0x8086), "a device of type cpu (Intel)"),
    ],
)
def test_software_descriptions_refused(device: DeviceInfo, words: str) -> None:
    why = not_a_gpu(device)
    assert why is not None and words in why and why.endswith("not a GPU")


@pytest.mark.parametrize(
    "device",
    [
        _device("gpu", "NVIDIA", 0x10DE, 0x2684),
        _device("gpu", "AMD", 0x1002, 0x744C),
        _device("gpu", "Intel", 0x8086, 0x56A0),
        _device("gpu", "Apple", 0x106B),
    ],
)
def test_hardware_descriptions_taken(device: DeviceInfo) -> None:
    assert not_a_gpu(device) is None


def test_default_offer_as_this_machine_has_it() -> None:
    offer = registry.default_offer({GPU_ONNX_RUNTIME: OnnxRuntimeAdapter(Unit.GPU)})
    if onnx_path.discover().chosen is None:  # here: no GPU, the reference offer
        assert offer == REFERENCE_OFFER
    else:
        assert offer[:2] == (NPU_MODEL_RUNTIME, GPU_ONNX_RUNTIME)


def test_default_offer_puts_a_present_gpu_after_the_npu() -> None:
    """The ordering rule (docs/dispatch.md), on an adapter whose answer is given."""
    present = {GPU_ONNX_RUNTIME: ScriptedAdapter(GPU_ONNX_RUNTIME)}
    assert registry.default_offer(present) == (
        NPU_MODEL_RUNTIME,
        GPU_ONNX_RUNTIME,
        *REFERENCE_OFFER[1:],
    )
    absent = {GPU_ONNX_RUNTIME: ScriptedAdapter(GPU_ONNX_RUNTIME, unit=False)}
    assert registry.default_offer(absent) == REFERENCE_OFFER


def test_session_deadline_refuses_a_build_that_never_returns() -> None:
    import threading

    release = threading.Event()
    with pytest.raises(onnx_path.SessionTimeout, match="did not build within"):
        onnx_path.within_deadline(release.wait, seconds=0.05)
    release.set()
    assert onnx_path.within_deadline(lambda: 7, seconds=5) == 7


def test_paths_lists_both_gpu_providers(capsys: pytest.CaptureFixture[str]) -> None:
    from wai_dispatch.cli.main import main

    assert main(["paths", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["paths"]
    (row,) = [r for r in rows if r["path"] == GPU_ONNX_RUNTIME.to_json()]
    if onnx_path.discover().chosen is None:
        assert row["present"] is False and row["offered"] is False
        assert "CUDAExecutionProvider" in row["reason"]
        assert "WebGpuExecutionProvider" in row["reason"]
    else:
        assert row["present"] is True and row["offered"] is True
