"""The ONNX Runtime path (``cpu/onnx-runtime/float``, and ``gpu/onnx-runtime/float`` through
whichever execution provider this machine has): §4's answers for a set's ``onnx-runtime``
program (docs/bmshj2018-set.md), its placement (§5) and its run; and ONNX Runtime in this
process, which every session of ours runs on.

- The runtime in this process: its one thread pool (every session runs on it; its size the
  ``ort_threads`` setting, else the CPUs; the one process-wide state a decoder's assembly sets,
  docs/onnx-path.md), the session options on that pool, the runtime's own log kept to fatal
  errors, and the run options that hand a large decode's arena back.
- The GPU's provider, found through ONNX Runtime's own provider and device discovery, never by
  building a session (docs/onnx-path.md): ``CUDAExecutionProvider`` first, then the
  ``onnxruntime-ep-webgpu`` plugin's ``WebGpuExecutionProvider`` on a hardware GPU device. A
  device of type CPU or from a software vendor (lavapipe, SwiftShader) is not a GPU: it is
  refused from its description alone, since a session on one was seen to hang. Discovery is
  cached for the process (:func:`discover`).

onnxruntime and onnx load on first use: importing this module loads nothing heavy. Both files
are read from the set's verified bytes (:meth:`SetFiles.read`), never from disk. Anything the
backend raises becomes :class:`dispatch.BackendFailed` with the backend's exception as
``__cause__``.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import numpy as np

from wai_dispatch.dispatch.adapter import BackendFailed
from wai_dispatch.dispatch.offer import DispatchPath
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.dispatch.tokens import Arithmetic, Backend, Unit
from wai_dispatch.paths import onnx_cache
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs, program_bytes
from wai_dispatch.paths.onnx_placement import (
    _profiled_trace,
    placement_from_trace,
    placement_of_program,
    program_operations,
)
from wai_dispatch.paths.onnx_rewrite import rewrite_model
from wai_dispatch.paths.tiling import Reach, onnx_layers, plan, reach, run_tiled

#: The key of this backend's program in a set's ``programs`` fact.
PROGRAM_KEY = "onnx-runtime"

_UNITS = (Unit.CPU, Unit.GPU)

#: A tile's peak memory per picture pixel of its window, as measured for the bmshj2018 set
#: (tools/bench_tiles.py): what :func:`paths.tiling.plan` sizes the tiles by.
TILE_BYTES_PER_PIXEL = 560
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Program:
    """A set's program, built: the session that runs, and its placement."""

    session: Any  # onnxruntime.InferenceSession
    input_name: str
    output_name: str
    input_shape: tuple[int | None, ...]  # None: a dynamic dimension
    placement: Placement  # the program's operations (§5)
    runtime_nodes: Placement  # the nodes of the graph ONNX Runtime ran, for `plan --json`
    rewritten: int  # transposed convolutions rewritten as sub-pixel convolutions
    nbytes: int  # as the program cache counts it (paths.lru.program_bytes)
    reach: Reach | None = None  # the receptive field, when the program tiles (paths.tiling)


class OnnxRuntimeAdapter:
    """§4's answers and the run for ``<unit>/onnx-runtime/float``; safe to share between threads.

    The placement (§5) is read from one profiled run of the very graph that runs
    (:func:`placement_of_program`); ``rewrite`` and ``glue`` choose the sub-pixel rewrite
    (:func:`paths.onnx_rewrite.rewrite_model`). Sessions are kept per set digest in
    ``programs``, the program cache the decoder's adapters share (docs/onnx-path.md).
    """

    def __init__(
        self,
        unit: Unit = Unit.CPU,
        *,
        rewrite: bool = True,
        glue: str = "split",
        programs: Programs | None = None,
        tile_bytes: int | None = None,
    ):
        if unit not in _UNITS:
            raise ValueError(f"ONNX Runtime runs on cpu or gpu, not {unit!r}")
        if glue not in ("split", "shuffle", "depth-to-space"):
            raise ValueError(f"glue is 'split', 'shuffle' or 'depth-to-space', not {glue!r}")
        self._unit = unit
        self._rewrite = rewrite
        self._glue = glue
        self._programs: Programs = LRU(DEFAULT_PROGRAM_BYTES) if programs is None else programs
        self._lock = threading.Lock()
        self._tile_bytes = tile_bytes  # None: the job's (the decoder's setting)
        self._stuck: str | None = None  # a GPU session that never built: the path is off
        # The programs' key: the path, and how the graph is built when it is not the default
        # (a cache shared with a differently built adapter of the same path holds both).
        variant = glue if rewrite else "no-rewrite"
        self._variant = variant
        self._key = str(self.path) + ("" if variant == "split" else f" ({variant})")

    @property
    def path(self) -> DispatchPath:
        return DispatchPath(self._unit, Backend.ONNX_RUNTIME, Arithmetic.FLOAT)

    def absent_reason(self) -> str | None:
        """Why the unit or the backend is absent, in words; ``None`` when present: the CPU's
        provider, or for the GPU ONNX Runtime's discovery of CUDA, else the WebGPU plugin on
        a hardware GPU (:func:`discover`; a software adapter is not a GPU)."""
        return self._stuck or provider_absent_reason(self._unit)

    def device(self) -> dict[str, object]:
        """The unit, and for the GPU the provider and device discovery found (``paths``)."""
        return provider_device(self._unit)

    # §4, in order -------------------------------------------------------------------------

    def unit_present(self) -> bool:
        return self.absent_reason() is None

    def program_present(self, job: SynthesisJob) -> bool:
        spec = _program_spec(job.set_files)
        if spec is None:
            return False
        return job.set_files.has(spec.file) and (
            spec.weights is None or job.set_files.has(spec.weights)
        )

    def takes_shape(self, job: SynthesisJob) -> bool:
        latent = job.latent
        if not isinstance(latent, np.ndarray) or latent.dtype != np.float32 or latent.ndim != 4:
            return False
        if min(latent.shape) <= 0:
            return False
        program = self._program(job)
        if len(program.input_shape) != 4:
            return False
        return all(
            d is None or d == n for d, n in zip(program.input_shape, latent.shape, strict=True)
        )

    def plan(self, job: SynthesisJob) -> Placement:
        """Where ONNX Runtime ran each of the set's program's operations, read from a
        profiled twin of the session that runs; cached."""
        return self._program(job).placement

    def runtime_nodes(self, job: SynthesisJob) -> Placement:
        """The nodes of the graph ONNX Runtime runs (after the rewrite and its own
        optimisations, layout reorders included), by unit: not §5's placement."""
        return self._program(job).runtime_nodes

    def run(self, job: SynthesisJob) -> np.ndarray:
        """The picture; a latent whose activations would pass the tile budget runs in tiles
        (:mod:`paths.tiling`), each tile's interior written into one picture."""
        program = self._program(job)
        latent = job.latent
        r = program.reach
        tiles = []
        if r is not None and program.input_shape[2:] == (None, None):
            budget = job.tile_bytes if self._tile_bytes is None else self._tile_bytes
            tiles = plan(latent.shape[2], latent.shape[3], r, budget, TILE_BYTES_PER_PIXEL)

        def run(x: np.ndarray, last: bool) -> np.ndarray:
            (out,) = program.session.run(
                [program.output_name], {program.input_name: x}, run_options(job, last)
            )
            return np.asarray(out, dtype=np.float32)

        try:
            if r is not None and len(tiles) > 1:
                return run_tiled(latent, r, tiles, run)
            out = run(latent, True)
        except Exception as exc:
            _log.warning("onnx-runtime: the synthesis failed: %s", exc)
            raise BackendFailed(f"onnx-runtime: the synthesis failed: {exc}") from exc
        return np.asarray(out, dtype=np.float32)

    # the sessions ---------------------------------------------------------------------------

    def session(self, job: SynthesisJob) -> Any:
        """The ``onnxruntime.InferenceSession`` that runs this job's set (cached)."""
        return self._program(job).session

    def rewritten(self, job: SynthesisJob) -> int:
        """How many transposed convolutions the running graph has rewritten."""
        return self._program(job).rewritten

    def _program(self, job: SynthesisJob) -> _Program:
        key = (self._key, job.set_files.digest)
        with self._lock:  # one build at a time; runs never hold the lock
            program = self._programs.get(key)
            if isinstance(program, _Program):
                return program
            try:
                program = self._build(job)
            except BackendFailed:
                raise
            except Exception as exc:
                _log.warning("onnx-runtime: the program does not load: %s", exc)
                raise BackendFailed(f"onnx-runtime: the program does not load: {exc}") from exc
            self._programs.put(key, program, program.nbytes)
            return program

    def _build(self, job: SynthesisJob) -> _Program:
        import onnxruntime as ort

        files = job.set_files
        spec = _program_spec(files)
        if spec is None:
            raise BackendFailed(f"the set has no {PROGRAM_KEY} program")
        model = files.read(spec.file)
        external: dict[str, bytes] = {}
        if spec.weights is not None:
            external[spec.weights] = files.read(spec.weights)
        nbytes = program_bytes([model, *external.values()])
        # the prepared graph is kept on disk by set digest (paths.onnx_cache): a process's
        # first decode of a set another process prepared does not rewrite it again
        cached = onnx_cache.load(job.cache_dir, files.digest, self._variant)
        if cached is None:
            cached = self._prepared(model, external)
            onnx_cache.store(job.cache_dir, files.digest, self._variant, cached)
        model, operations, rewritten, tiles = cached

        configure = functools.partial(configure_provider, self._unit)

        def options() -> Any:
            so = shared_session_options()
            if external:
                names = list(external)
                buffers = [external[n] for n in names]
                so.add_external_initializers_from_files_in_memory(
                    names, buffers, [len(b) for b in buffers]
                )
            return so

        def build() -> tuple[Any, Any, Any, tuple[int | None, ...], list[dict[str, Any]]]:
            so = options()
            session = ort.InferenceSession(model, so, **configure(so))
            inp = _named(session.get_inputs(), spec.input)
            out = _named(session.get_outputs(), spec.output)
            shape = tuple(d if isinstance(d, int) and d > 0 else None for d in inp.shape)
            events = _profiled_trace(ort, model, options(), configure, inp.name, shape, job)
            return session, inp, out, shape, events

        if self._unit is Unit.CPU:
            session, inp, out, shape, events = build()
        else:  # a GPU driver that never answers must not hold the decode for good
            try:
                session, inp, out, shape, events = within_deadline(build)
            except SessionTimeout as exc:
                self._stuck = f"{exc}; the path is off for this process"
                raise BackendFailed(f"onnx-runtime: {self._stuck}") from exc
        return _Program(
            session,
            inp.name,
            out.name,
            shape,
            placement_of_program(operations, events),
            placement_from_trace(events),
            rewritten,
            nbytes,
            tiles,
        )

    def _prepared(
        self, model: bytes, external: Mapping[str, bytes]
    ) -> tuple[bytes, list[str], int, Reach | None]:
        """The graph to run (every node named; rewritten when on), the program's operations
        as the set ships them, how many ConvTranspose the rewrite replaced, and the
        program's receptive field (read from the graph as shipped; ``None``: no tiles)."""
        import onnx

        proto = onnx.load_from_string(model)
        before = [n.name for n in proto.graph.node]
        operations = program_operations(proto)
        layers = onnx_layers(proto.graph)
        weights = {i.name for i in proto.graph.initializer}
        graph_in = [i.name for i in proto.graph.input if i.name not in weights]
        graph_out = [o.name for o in proto.graph.output]
        tiles = None
        if layers is not None and len(graph_in) == 1 and len(graph_out) == 1:
            tiles = reach(layers, graph_in[0], graph_out[0])
        renamed = before != [n.name for n in proto.graph.node]
        count = 0
        if self._rewrite:
            count = rewrite_model(proto, external, self._glue)
        changed = renamed or count
        return (proto.SerializeToString() if changed else model), operations, count, tiles


def _program_spec(files: SetFiles) -> _Spec | None:
    spec = files.facts.program(PROGRAM_KEY)
    if spec is None or spec.file is None:
        return None
    return _Spec(spec.file, spec.weights, spec.input, spec.output)


class _Spec(NamedTuple):
    """The set's ONNX program: its file, its external weights, its input and output names."""

    file: str
    weights: str | None
    input: str | None
    output: str | None


def _named(args: Sequence[Any], name: object) -> Any:
    """The session's input or output called ``name`` (the only one when the set names none)."""
    if name is None and len(args) == 1:
        return args[0]
    for arg in args:
        if arg.name == name:
            return arg
    raise BackendFailed(f"onnx-runtime: the program has no {name!r} among {[a.name for a in args]}")


# --- ONNX Runtime in this process: its thread pool, session and run options -------------------

_ORT_FATAL = 4  # ONNX Runtime's log severities: 0 verbose … 3 error, 4 fatal

#: A run whose latent has more elements than this (192×32×32: a 512×512 picture with the
#: bundled set) asks ONNX Runtime to shrink its CPU arena afterwards, handing the run's
#: activations back to the allocator instead of keeping them for the next run: a 1024×1024
#: decode otherwise leaves ~500 MB resident for good (docs/service.md, Limits). Smaller runs
#: keep the arena warm (shrinking costs a run's allocations the next time).
SHRINK_ARENA_ABOVE = 192 * 32 * 32
_SHRINK_ENTRY = "memory.enable_memory_arena_shrinkage"

_pool_lock = threading.Lock()
_pool_threads: int | None = None
_requested: int | None = None


def configure_thread_pool(intra_op_threads: int | None = None) -> int:
    """Create ONNX Runtime's process-wide thread pool, once; return its intra-op size.

    One pool, because per-session pools spin and steal each other's cores (docs/onnx-path.md).
    The size is ``intra_op_threads``, else :func:`request_thread_pool`'s, else the CPUs this
    process may use; later calls return the size already chosen.
    """
    global _pool_threads
    with _pool_lock:
        if _pool_threads is not None:
            return _pool_threads
        import onnxruntime as ort

        _quiet_runtime_log(ort)
        threads = intra_op_threads or _requested or len(os.sched_getaffinity(0))
        try:
            ort.set_global_thread_pool_sizes(threads, 1)
        except Exception as exc:  # pools already created by someone else in this process
            if "already been created" not in str(exc):
                raise
        _pool_threads = threads
        return threads


def run_options(job: SynthesisJob, last: bool = True) -> Any:
    """``None`` (the defaults) for a decode of :data:`SHRINK_ARENA_ABOVE` latent elements or
    fewer, and for any tile of a larger one but its ``last``; for that run, ``RunOptions``
    that shrink the CPU arena once it ends (a tiled decode keeps one tile's activations in
    the arena between its tiles, and none after)."""
    if job.latent.size <= SHRINK_ARENA_ABOVE or not last:
        return None
    return arena_shrink_options()


def arena_shrink_options() -> Any:
    """``RunOptions`` that shrink the CPU arena once the run ends."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry(_SHRINK_ENTRY, "cpu:0")
    return options


def request_thread_pool(intra_op_threads: int | None) -> None:
    """The size :func:`configure_thread_pool` gives the pool when it is created without one
    (``None``: the CPUs). Imports no runtime: the decoder calls it with the ``ort_threads``
    setting when it opens."""
    global _requested
    with _pool_lock:
        _requested = intra_op_threads


def _quiet_runtime_log(ort: Any) -> None:
    """ONNX Runtime writes its own (coloured) log lines to stderr, a failing kernel's among
    them. Its default logger is kept to fatal errors only: what fails reaches us as the
    exception, which becomes BackendFailed and is logged through Python's ``logging``."""
    ort.set_default_logger_severity(_ORT_FATAL)


def shared_session_options() -> Any:
    """``onnxruntime.SessionOptions`` on the process-wide pool, optimisation level ALL.

    Once the global pool exists, ONNX Runtime refuses any session in the process that asks
    for its own threads ("use_per_session_threads must be false when using a global thread
    pool"): other code that builds sessions beside this adapter starts from these options.
    """
    import onnxruntime as ort

    configure_thread_pool()
    so = ort.SessionOptions()
    so.use_per_session_threads = False
    so.log_severity_level = _ORT_FATAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return so


# --- the GPU's execution provider -------------------------------------------------------------

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


def provider_absent_reason(unit: Unit) -> str | None:
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


def provider_device(unit: Unit) -> dict[str, object]:
    """The unit, and for the GPU the provider and the device discovery found."""
    chosen = discover().chosen if unit is Unit.GPU else None
    return {"unit": str(unit), **({} if chosen is None else chosen.describe())}


def configure_provider(unit: Unit, so: Any) -> dict[str, Any]:
    """Give ``so`` the provider that runs ``unit``; return ``InferenceSession``'s keywords."""
    if unit is Unit.CPU:
        return {"providers": [CPU]}
    chosen = discover().chosen
    if chosen is None:
        raise BackendFailed(f"onnx-runtime: {discover().reason()}")
    return chosen.configure(so)
