"""A small wgpu runner: acquire the adapter and device, upload int32 buffers, build compute
pipelines (cached per WGSL source on this device), dispatch, and read back.

wgpu is imported on first use. Readback is the synchronisation point: on lavapipe
``on_submitted_work_done_sync`` was seen not to return. No adapter, driver or wgpu →
:class:`UnitAbsent`; anything the backend raises after that → :class:`dispatch.BackendFailed`.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_dispatch.dispatch.adapter import BackendFailed

#: The device limits the descriptors read, by WebGPU's camelCase name.
LIMITS = (
    "maxComputeWorkgroupsPerDimension",
    "maxStorageBufferBindingSize",
    "maxBufferSize",
    "maxUniformBufferBindingSize",
    "maxComputeInvocationsPerWorkgroup",
    "maxComputeWorkgroupSizeX",
    "maxStorageBuffersPerShaderStage",
)
#: Adapter types (wgpu's ``adapter_type``) that are a GPU; ``CPU`` is a software rasteriser.
GPU_TYPES = frozenset({"DiscreteGPU", "IntegratedGPU"})
_MIN_BUFFER = 16


class UnitAbsent(Exception):
    """No WebGPU adapter here (no wgpu, no Vulkan/Metal/D3D driver): §4 ``dispatch_unit_absent``."""


def _kebab(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name)


def _ensure_runtime_dir() -> None:
    # wgpu-native's Vulkan loader wants XDG_RUNTIME_DIR; a private directory when unset.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="wai-wgpu-")


class Runner:
    """One WebGPU device. Safe to share between threads (one submission at a time)."""

    def __init__(self, adapter: Any, device: Any) -> None:
        self._adapter = adapter
        self._device = device
        self._pipelines: dict[str, Any] = {}
        self._lock = threading.RLock()
        info = adapter.info
        self.info: dict[str, str] = {
            key: str(info.get(key, ""))
            for key in ("adapter_type", "backend_type", "vendor", "device", "description")
        }
        self.limits: dict[str, int] = {name: int(device.limits[_kebab(name)]) for name in LIMITS}

    @classmethod
    def acquire(cls) -> Runner:
        """The machine's preferred (high-performance) adapter and a device with its limits."""
        _ensure_runtime_dir()
        try:
            import wgpu  # type: ignore[import-untyped, unused-ignore]
        except ImportError as exc:
            raise UnitAbsent(f"wgpu is not installed ({exc})") from exc
        except Exception as exc:  # wgpu-native's library does not load on this machine
            raise UnitAbsent(f"wgpu does not load ({exc})") from exc
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as exc:  # wgpu-native raises when no driver offers an adapter
            raise UnitAbsent(f"no WebGPU adapter (no Vulkan/Metal/D3D12 driver?): {exc}") from exc
        if adapter is None:
            raise UnitAbsent("no WebGPU adapter (no Vulkan/Metal/D3D12 driver?)")
        wanted = ("max-storage-buffer-binding-size", "max-buffer-size")
        try:
            device = adapter.request_device_sync(
                required_limits={key: adapter.limits[key] for key in wanted}
            )
        except Exception as exc:
            raise UnitAbsent(f"the WebGPU adapter gives no device: {exc}") from exc
        return cls(adapter, device)

    @property
    def adapter_type(self) -> str:
        return self.info["adapter_type"]

    @property
    def is_gpu(self) -> bool:
        return self.adapter_type in GPU_TYPES

    def describe(self) -> str:
        i = self.info
        return f"{i['device'] or i['vendor']} ({i['adapter_type']}, {i['backend_type']})"

    # buffers --------------------------------------------------------------------------------

    def upload(self, array: np.ndarray) -> Any:
        """A storage buffer holding ``array`` as little-endian int32."""
        import wgpu

        data = np.ascontiguousarray(array, dtype="<i4").tobytes()
        data += bytes(max(0, _MIN_BUFFER - len(data)))
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
        return self._call(lambda: self._device.create_buffer_with_data(data=data, usage=usage))

    def output(self, count: int) -> Any:
        """A storage buffer for ``count`` int32 values."""
        import wgpu

        size = max(_MIN_BUFFER, 4 * count)
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
        return self._call(lambda: self._device.create_buffer(size=size, usage=usage))

    def read(self, buffer: Any, count: int) -> np.ndarray:
        """The first ``count`` int32 values of ``buffer``, after every submitted dispatch."""
        with self._lock:
            data = self._call(lambda: self._device.queue.read_buffer(buffer, 0, buffer.size))
        return np.frombuffer(data, dtype="<i4", count=count).astype(np.int32)

    # pipelines and dispatch -----------------------------------------------------------------

    def pipeline(self, source: str) -> Any:
        """The compute pipeline of a WGSL source (entry point ``main``), built once."""
        with self._lock:
            hit = self._pipelines.get(source)
            if hit is None:

                def build() -> Any:
                    module = self._device.create_shader_module(code=source)
                    return self._device.create_compute_pipeline(
                        layout="auto", compute={"module": module, "entry_point": "main"}
                    )

                hit = self._call(build, "the WGSL kernel does not compile")
                self._pipelines[source] = hit
            return hit

    def dispatch(
        self,
        source: str,
        buffers: Sequence[Any],
        uniform: Sequence[tuple[str, int]],
        groups: tuple[int, int],
    ) -> None:
        """Bind ``buffers`` (in binding order) and the uniform struct's values (its last
        binding: (type, value) pairs, 4 bytes each), and submit one dispatch."""
        import wgpu

        pipeline = self.pipeline(source)
        packed = b"".join(
            struct.pack("<i" if kind == "i32" else "<I", value) for kind, value in uniform
        )
        packed += bytes(-len(packed) % 16)

        def submit() -> None:
            params = self._device.create_buffer_with_data(
                data=packed, usage=wgpu.BufferUsage.UNIFORM
            )
            entries = [
                {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                for i, b in enumerate([*buffers, params])
            ]
            group = self._device.create_bind_group(
                layout=pipeline.get_bind_group_layout(0), entries=entries
            )
            encoder = self._device.create_command_encoder()
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(groups[0], groups[1], 1)
            compute.end()
            self._device.queue.submit([encoder.finish()])

        with self._lock:
            self._call(submit, "the dispatch failed")

    def _call(self, fn: Any, what: str = "the WebGPU call failed") -> Any:
        try:
            return fn()
        except BackendFailed:
            raise
        except Exception as exc:  # GPUValidationError, GPUOutOfMemoryError, a lost device, …
            raise BackendFailed(f"wgsl: {what}: {exc}") from exc


def check_binding_sizes(limits: Mapping[str, int], sizes: Sequence[int]) -> None:
    """A last check before submission: each binding within the device's binding size."""
    limit = min(limits["maxStorageBufferBindingSize"], limits["maxBufferSize"])
    for size in sizes:
        if size > limit:
            raise BackendFailed(
                f"wgsl: a binding of {size} bytes exceeds maxStorageBufferBindingSize {limit}"
            )
