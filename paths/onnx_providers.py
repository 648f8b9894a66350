"""Which ONNX Runtime execution provider runs ``gpu/onnx-runtime/float`` on this machine, found
through ONNX Runtime's own provider and device discovery, never by building a session.

Two providers reach a GPU, tried in this order (docs/onnx-path.md):

1. ``CUDAExecutionProvider``: an NVIDIA GPU, in a CUDA build of ONNX Runtime (``onnxruntime-gpu``):
   present when ``onnxruntime.get_available_providers()`` names it.
2. ``WebGpuExecutionProvider``: any vendor's GPU through Dawn (Vulkan on Linux, Metal on macOS,
   D3D12 on Windows), the ``onnxruntime-ep-webgpu`` plugin (the ``webgpu`` extra). The plugin's
   library is registered with ONNX Runtime once per process, and the devices it offers are read
   from ``onnxruntime.get_ep_devices()``: one of hardware type GPU, from no software vendor, is
   the GPU. A device of type CPU (the plugin offers one under
   ``ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1``: a software rasteriser such as lavapipe or
   SwiftShader) or of a software vendor is **not a GPU**: it is refused from its description
   alone, and no session is ever made on it (a session on such a device was seen to hang).

Discovery is cached for the process (:func:`discover`); ``import paths.onnx_providers`` loads
nothing heavy.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from wai_dispatch.dispatch.adapter import BackendFailed
from wai_dispatch.dispatch.tokens import Unit

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
WEBGPU = "WebGpuExecutionProvider"
#: The name the plugin's library is registered under (``register_execution_provider_library``).
WEBGPU_REGISTRATION = "webgpu"
#: The plugin's distribution and the extra that installs it.
WEBGPU_PLUGIN = "onnxruntime-ep-webgpu"

#: PCI vendor ids of software adapters (a rasteriser on the CPU, not a GPU).
SOFTWARE_VENDOR_IDS: Mapping[int, str] = {
    0x10005: "Mesa's software rasteriser (llvmpipe/lavapipe)",
    0x1AE0: "Google's SwiftShader",
}
#: Words in a device's vendor or description that name a software adapter.
SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "softpipe", "swiftshader", "basic render", "warp")
#: Microsoft's Basic Render Driver (WARP): vendor 0x1414, device 0x8C.
_WARP = (0x1414, 0x8C)

#: How long a GPU session may take to build before the path is refused and left off for the
#: process (a driver that never answers must not hold a decode for good).
SESSION_DEADLINE_S = 180.0


@dataclass(frozen=True)
class DeviceInfo:
    """What ONNX Runtime's discovery states of one device an execution provider offers."""

    provider: str
    hardware_type: str  # "cpu", "gpu" or "npu" (OrtHardwareDeviceType)
    vendor: str
    vendor_id: int
    device_id: int
    metadata: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "provider": self.provider,
            "type": self.hardware_type,
            "vendor": self.vendor,
            "vendor_id": f"0x{self.vendor_id:04x}",
            "device_id": f"0x{self.device_id:04x}",
            **{k: v for k, v in sorted(self.metadata.items()) if k.lower() == "description"},
        }


def not_a_gpu(device: DeviceInfo) -> str | None:
    """Why ``device`` is not a hardware GPU (a software adapter, or not a GPU at all), read from
    its description alone; ``None`` for a hardware GPU. Pure: no session is made."""
    words = " ".join([device.vendor, *device.metadata.values()]).lower()
    soft = SOFTWARE_VENDOR_IDS.get(device.vendor_id)
    if soft is None and (device.vendor_id, device.device_id) == _WARP:
        soft = "Microsoft's Basic Render Driver"
    if soft is None:
        soft = next((w for w in SOFTWARE_NAMES if w in words), None)
    if soft is not None:
        return f"a software adapter ({soft}), not a GPU"
    if device.hardware_type != "gpu":
        return (
            f"a device of type {device.hardware_type} ({device.vendor or 'unknown vendor'}): "
            "a software adapter, not a GPU"
        )
    return None


@dataclass(frozen=True)
class GpuProvider:
    """The provider that runs the GPU path, and how a session is given it."""

    name: str  # CUDA or WEBGPU
    device: DeviceInfo | None  # the plugin's device; None for CUDA (a build's provider)
    ep_device: Any = None  # the onnxruntime.OrtEpDevice the plugin offered

    def configure(self, so: Any) -> dict[str, Any]:
        """Give ``so`` (``SessionOptions``) this provider; return the keyword arguments of
        ``InferenceSession`` (any node the provider does not take falls back to the CPU)."""
        if self.ep_device is not None:
            so.add_provider_for_devices([self.ep_device], {"powerPreference": "high-performance"})
            return {}
        return {"providers": [self.name, CPU]}

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"provider": self.name}
        if self.device is not None:
            out.update(self.device.to_json())
        return out


@dataclass(frozen=True)
class GpuDiscovery:
    """The GPU provider found (or none), and why each other provider is absent."""

    chosen: GpuProvider | None
    absent: Mapping[str, str]  # provider name → why it is absent here

    def reason(self) -> str | None:
        """Why the GPU path is absent, every provider named; ``None`` when one is present."""
        if self.chosen is not None:
            return None
        return "no GPU provider: " + "; ".join(f"{k}: {v}" for k, v in self.absent.items())


def _cuda(ort: Any) -> str | None:
    available = list(ort.get_available_providers())
    if CUDA in available:
        return None
    return (
        f"this onnxruntime {ort.__version__} build has no {CUDA} (a CUDA build, onnxruntime-gpu, "
        f"has it; this one has {', '.join(available)})"
    )


_log = logging.getLogger(__name__)
_register_lock = threading.Lock()
_registered: list[str] = []


def _register_webgpu(ort: Any) -> str | None:
    """Register the plugin's library once per process; why not, or ``None``."""
    with _register_lock:
        if _registered:
            return None
        try:
            import onnxruntime_ep_webgpu as plugin
        except ImportError:
            return (
                f"the {WEBGPU_PLUGIN} plugin is not installed (pip install 'wai-dispatch[webgpu]')"
            )
        try:
            ort.register_execution_provider_library(WEBGPU_REGISTRATION, plugin.get_library_path())
        except Exception as exc:  # an incompatible ONNX Runtime, a missing Vulkan loader
            _log.warning("the %s plugin does not register", WEBGPU_PLUGIN, exc_info=exc)
            return f"the {WEBGPU_PLUGIN} plugin does not register: {' '.join(str(exc).split())}"
        _registered.append(plugin.get_library_path())
        return None


def device_info(ep_device: Any) -> DeviceInfo:
    """The description of an ``onnxruntime.OrtEpDevice``."""
    hw = ep_device.device
    kind = str(getattr(hw.type, "name", hw.type)).lower()
    return DeviceInfo(
        provider=str(ep_device.ep_name),
        hardware_type=kind,
        vendor=str(hw.vendor),
        vendor_id=int(hw.vendor_id),
        device_id=int(hw.device_id),
        metadata={str(k): str(v) for k, v in dict(hw.metadata).items()},
    )


def _webgpu(ort: Any) -> tuple[GpuProvider | None, str | None]:
    why = _register_webgpu(ort)
    if why is not None:
        return None, why
    offered = [d for d in ort.get_ep_devices() if d.ep_name == WEBGPU]
    if not offered:
        found = ", ".join(
            f"{device_info(d).hardware_type} {device_info(d).vendor}" for d in ort.get_ep_devices()
        )
        return None, (
            f"the {WEBGPU_PLUGIN} plugin offers no device: ONNX Runtime's discovery found no GPU "
            f"(it found: {found or 'nothing'})"
        )
    refused = []
    for ep_device in offered:
        info = device_info(ep_device)
        not_gpu = not_a_gpu(info)
        if not_gpu is None:
            return GpuProvider(WEBGPU, info, ep_device), None
        refused.append(not_gpu)
    return None, f"the {WEBGPU_PLUGIN} plugin offers only " + "; ".join(refused)


def discover_now() -> GpuDiscovery:
    """ONNX Runtime's discovery, asked now: CUDA first, then the WebGPU plugin."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        return GpuDiscovery(None, {"onnxruntime": f"not installed ({exc})"})
    absent: dict[str, str] = {}
    cuda_missing = _cuda(ort)
    if cuda_missing is None:
        return GpuDiscovery(GpuProvider(CUDA, None), {})
    absent[CUDA] = cuda_missing
    chosen, why = _webgpu(ort)
    if why is not None:
        absent[WEBGPU] = why
    return GpuDiscovery(chosen, absent)


@functools.cache
def discover() -> GpuDiscovery:
    """:func:`discover_now`, once per process."""
    return discover_now()


T = TypeVar("T")


class SessionTimeout(Exception):
    """A GPU session did not build within :data:`SESSION_DEADLINE_S`."""


def within_deadline(build: Callable[[], T], seconds: float = SESSION_DEADLINE_S) -> T:
    """``build()`` in a daemon thread; :class:`SessionTimeout` when it has not returned within
    ``seconds`` (the thread is left behind: a native call cannot be interrupted)."""
    box: list[T] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            box.append(build())
        except BaseException as exc:  # raised again in the caller's thread, below
            error.append(exc)

    thread = threading.Thread(target=work, name="wai-gpu-session", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise SessionTimeout(f"the GPU session did not build within {seconds:g} s")
    if error:
        raise error[0]
    return box[0]


def absent_reason(unit: Unit) -> str | None:
    """Why ONNX Runtime cannot run on ``unit`` here; ``None`` when it can."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        return f"onnxruntime is not installed ({exc})"
    if unit is Unit.CPU:
        if CPU not in ort.get_available_providers():
            return f"this onnxruntime {ort.__version__} build has no {CPU}"
        return None
    return discover().reason()


def device(unit: Unit) -> dict[str, object]:
    """The unit, and for the GPU the provider and the device discovery found."""
    chosen = discover().chosen if unit is Unit.GPU else None
    return {"unit": str(unit), **({} if chosen is None else chosen.describe())}


def configure(unit: Unit, so: Any) -> dict[str, Any]:
    """Give ``so`` the provider that runs ``unit``; return ``InferenceSession``'s keywords."""
    if unit is Unit.CPU:
        return {"providers": [CPU]}
    chosen = discover().chosen
    if chosen is None:
        raise BackendFailed(f"onnx-runtime: {discover().reason()}")
    return chosen.configure(so)
