"""The platform's model runtime on the neural processor: Core ML, path ``npu/model-runtime/float``
(§6.1). Runs only on macOS 14.4 or later; everywhere else the unit is absent (§4).

The adapter asks Core ML itself, behind one Protocol (:class:`CoreMLRuntime`):
:class:`NativeCoreML` drives coremltools' runtime (macOS 14.4 or later), tests inject a
:class:`ScriptedCoreML` (a plan and outputs chosen in advance), so everything but the runtime
itself is tested on Linux. Where it is absent, :func:`coreml_absent_reason` says why.
"""

from __future__ import annotations

import platform
import shutil
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from wai_dispatch.dispatch import NPU_MODEL_RUNTIME, BackendFailed, DispatchPath, Placement
from wai_dispatch.paths.coreml_set import (
    ProgramFiles,
    ProgramInput,
    placement_from_plan,
    program_shape,
    read_program_input,
    write_package,
)
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs, program_bytes

# --- the adapter ------------------------------------------------------------------------------


class _Folder:
    """A private folder removed by :meth:`cleanup`, or when the object is collected (an evicted
    program's: ``weakref.finalize``, which, unlike ``TemporaryDirectory``'s, warns of nothing)."""

    def __init__(self, prefix: str) -> None:
        self.name = tempfile.mkdtemp(prefix=prefix)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.name, ignore_errors=True)

    def cleanup(self) -> None:
        self._finalizer()


@dataclass
class _Compiled:
    """One set's program, compiled and loaded, with its placement (cached per set digest)."""

    tmp: _Folder
    model: Any
    placement: Placement
    files: ProgramFiles
    program_input: ProgramInput | None
    nbytes: int = 0  # as the program cache counts it (paths.lru.program_bytes)


class CoreMLAdapter:
    """§4's answers for ``npu/model-runtime/float`` (§6.1). ``runtime`` defaults to the
    native one; inject a :class:`ScriptedCoreML` to test without macOS. Compiled programs are
    kept per set digest in ``programs`` (the program cache the decoder's adapters share; one of
    its own with the default budget when none is given); an evicted one's folder is removed
    when it is collected (:class:`_Folder`'s finaliser), :meth:`close` removes them all."""

    def __init__(
        self, runtime: CoreMLRuntime | None = None, *, programs: Programs | None = None
    ) -> None:
        self._runtime: CoreMLRuntime = runtime if runtime is not None else NativeCoreML()
        self._programs: Programs = LRU(DEFAULT_PROGRAM_BYTES) if programs is None else programs
        self._lock = threading.Lock()

    @property
    def path(self) -> DispatchPath:
        return NPU_MODEL_RUNTIME

    def absent_reason(self) -> str | None:
        """Why the unit is absent (``wai-dispatch paths``), or ``None`` when it is there."""
        return self._runtime.absent_reason()

    def unit_present(self) -> bool:
        return self._runtime.absent_reason() is None

    def program_present(self, job: SynthesisJob) -> bool:
        files = ProgramFiles.from_facts(job.set_files.facts)
        return job.set_files.has(files.spec) and job.set_files.has(files.weights)

    def takes_shape(self, job: SynthesisJob) -> bool:
        """§6.1: the program's one input fixes the latent's shape."""
        try:
            shape = program_shape(job.set_files)
        except ValueError as exc:  # a program the runtime could not load either
            raise BackendFailed(f"Core ML: {exc}") from exc
        return shape is not None and shape == job.latent_shape

    def plan(self, job: SynthesisJob) -> Placement:
        return self._compiled(job.set_files).placement

    def run(self, job: SynthesisJob) -> np.ndarray:
        compiled = self._compiled(job.set_files)
        name = compiled.files.input
        float16 = compiled.program_input is not None and compiled.program_input.float16
        latent = np.ascontiguousarray(job.latent, dtype=np.float16 if float16 else np.float32)
        try:
            outputs = self._runtime.predict(compiled.model, {name: latent})
            x_hat = outputs[compiled.files.output]
        except Exception as exc:
            raise BackendFailed(f"Core ML failed the prediction: {exc}") from exc
        return np.asarray(x_hat, dtype=np.float32)

    def close(self) -> None:
        """Remove every package and compiled model this adapter wrote."""
        with self._lock:
            for key in self._programs.entries():
                entry = self._programs.pop(key) if key[0] == str(self.path) else None
                if isinstance(entry, _Compiled):
                    entry.tmp.cleanup()

    def _compiled(self, set_files: SetFiles) -> _Compiled:
        # A set's digest addresses its bytes, so one compile per digest serves every decode.
        key = (str(self.path), set_files.digest)
        with self._lock:
            entry = self._programs.get(key)
            if not isinstance(entry, _Compiled):
                entry = self._compile(set_files)
                self._programs.put(key, entry, entry.nbytes)
            return entry

    def _compile(self, set_files: SetFiles) -> _Compiled:
        files = ProgramFiles.from_facts(set_files.facts)
        # §6.1: the bytes read from the set (those a pin verified), never re-read from disk.
        spec_bytes, weight_bytes = set_files.read(files.spec), set_files.read(files.weights)
        try:
            program_input: ProgramInput | None = read_program_input(spec_bytes, files.input)
        except (ImportError, ValueError):
            program_input = None  # the runtime says what is wrong, if anything, below
        tmp = _Folder("wai-coreml-")
        step = "placing the set's program in a package"
        try:
            package = write_package(tmp.name, spec_bytes, weight_bytes)
            step = "compiling the program"
            compiled = self._runtime.compile(str(package))
            step = "loading the program for the CPU and the neural processor"
            model = self._runtime.load(compiled)
            step = "reading the compute plan"
            placement = placement_from_plan(self._runtime.plan(compiled))
        except Exception as exc:  # §4: the backend's error refuses the path, cause kept
            tmp.cleanup()
            raise BackendFailed(f"Core ML failed {step}: {exc}") from exc
        nbytes = program_bytes([spec_bytes, weight_bytes])
        return _Compiled(tmp, model, placement, files, program_input, nbytes)


# --- Core ML itself, behind one Protocol: the native runtime or a scripted one ----------------

#: ``MLComputePlan`` (the per-operation device the runtime prefers, §5) exists from macOS 14.4.
MIN_MACOS = (14, 4)


class _ComputeUnit(Protocol):  # coremltools.ComputeUnit (an enum)
    CPU_AND_NE: object


class _CoreMLTools(Protocol):  # coremltools
    ComputeUnit: _ComputeUnit


class _CoreMLUtils(Protocol):  # coremltools.models.utils
    def compile_model(self, model: str, destination_path: str | None = None) -> object: ...


class _CoreMLModels(Protocol):  # coremltools.models
    def CompiledMLModel(self, path: str, *, compute_units: object) -> Any: ...


class _PlanBlock(Protocol):
    @property
    def operations(self) -> Sequence[_PlanOperation]: ...


class _PlanOperation(Protocol):
    @property
    def operator_name(self) -> str: ...
    @property
    def blocks(self) -> Sequence[_PlanBlock]: ...


class _PlanFunction(Protocol):
    block: _PlanBlock


class _PlanProgram(Protocol):
    functions: Mapping[str, _PlanFunction]


class _ModelStructure(Protocol):
    program: _PlanProgram | None


class _DeviceUsage(Protocol):
    preferred_compute_device: object | None


class _ComputePlan(Protocol):  # coremltools.models.compute_plan.MLComputePlan
    model_structure: _ModelStructure

    def get_compute_device_usage_for_mlprogram_operation(
        self, operation: _PlanOperation
    ) -> _DeviceUsage | None: ...


class _MLComputePlan(Protocol):  # the class itself
    def load_from_path(self, path: str, *, compute_units: object) -> _ComputePlan: ...


class _CoreMLComputePlan(Protocol):  # coremltools.models.compute_plan
    MLComputePlan: _MLComputePlan


# --- the runtime ------------------------------------------------------------------------------


class CoreMLRuntime(Protocol):
    """What the adapter asks of Core ML. Every method but :meth:`absent_reason` may raise;
    the adapter turns that into :class:`~dispatch.BackendFailed`."""

    def absent_reason(self) -> str | None:
        """``None`` when the runtime is there, else why not, for a person."""
        ...

    def compile(self, package: str) -> str:
        """Compile a ``.mlpackage``; the path of the compiled ``.mlmodelc``."""
        ...

    def load(self, compiled: str) -> Any:
        """Load the compiled model for the CPU and the neural processor."""
        ...

    def plan(self, compiled: str) -> Iterable[tuple[str, str | None]]:
        """The compute plan for the CPU and the neural processor: each operation of the main
        function, nested blocks included, with its preferred device (or ``None``)."""
        ...

    def predict(self, model: Any, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]: ...


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def coreml_absent_reason(
    system: str,
    mac_version: str,
    importer: Callable[[str], object] = import_module,
) -> str | None:
    """Why Core ML cannot run here, or ``None``. Pure but for ``importer``, so that each
    reason is testable on any machine. The platform is asked first: on Linux nothing heavy
    is imported."""
    if system != "Darwin":
        return f"Core ML needs macOS {'.'.join(map(str, MIN_MACOS))} or later; this is {system}"
    if _version(mac_version) < MIN_MACOS:
        return (
            f"Core ML's compute plan needs macOS {'.'.join(map(str, MIN_MACOS))} or later; "
            f"this is macOS {mac_version or 'of an unknown version'}"
        )
    try:
        importer("coremltools")
    except ImportError:
        return "coremltools is not installed"
    try:
        native = importer("coremltools.libcoremlpython")
    except ImportError as exc:
        return f"coremltools has no native runtime (libcoremlpython: {exc})"
    if not hasattr(native, "_MLModelProxy"):
        return "coremltools' native runtime has no _MLModelProxy"
    return None


class NativeCoreML:
    """Core ML through coremltools 8/9 (``compile_model``, ``CompiledMLModel``,
    ``MLComputePlan``), for the CPU and the neural processor (``ComputeUnit.CPU_AND_NE``)."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._checked = False

    def absent_reason(self) -> str | None:
        if not self._checked:
            system = platform.system() or sys.platform
            self._reason = coreml_absent_reason(system, platform.mac_ver()[0])
            self._checked = True
        return self._reason

    def compile(self, package: str) -> str:
        utils = cast(_CoreMLUtils, import_module("coremltools.models.utils"))

        destination = package.removesuffix(".mlpackage") + ".mlmodelc"
        # With a destination, compile_model moves the compiled model there and returns None.
        utils.compile_model(package, destination)
        return destination

    def load(self, compiled: str) -> Any:
        ct = cast(_CoreMLTools, import_module("coremltools"))
        models = cast(_CoreMLModels, import_module("coremltools.models"))

        return models.CompiledMLModel(compiled, compute_units=ct.ComputeUnit.CPU_AND_NE)

    def plan(self, compiled: str) -> list[tuple[str, str | None]]:
        ct = cast(_CoreMLTools, import_module("coremltools"))
        plans = cast(_CoreMLComputePlan, import_module("coremltools.models.compute_plan"))

        plan = plans.MLComputePlan.load_from_path(compiled, compute_units=ct.ComputeUnit.CPU_AND_NE)
        program = plan.model_structure.program
        if program is None:
            raise ValueError("the compiled model is not an ML Program")
        main = program.functions["main"]
        rows: list[tuple[str, str | None]] = []
        for op in _operations(main.block):
            usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
            device = None if usage is None else usage.preferred_compute_device
            rows.append((op.operator_name, None if device is None else type(device).__name__))
        return rows

    def predict(self, model: Any, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]:
        result: Mapping[str, Any] = model.predict(dict(inputs))
        return result


def _operations(block: _PlanBlock) -> Iterator[_PlanOperation]:
    """Every operation of a block, and of the blocks nested in its operations (loops,
    conditionals), in program order."""
    for op in block.operations:
        yield op
        for inner in op.blocks:
            yield from _operations(inner)


@dataclass
class ScriptedCoreML:
    """A runtime whose plan and output are chosen in advance (tests, and any machine without
    Core ML). ``plan_rows`` is the compute plan; ``output`` what ``predict`` returns (default:
    zeros of ``output_shape``); ``fails`` names a step that raises. ``packages`` keeps what
    :meth:`compile` was given, read back from disk, so tests can check the package."""

    plan_rows: list[tuple[str, str | None]] = field(default_factory=list)
    output: np.ndarray | None = None
    output_shape: tuple[int, ...] = (1, 3, 256, 256)
    fails: str | None = None
    reason: str | None = None
    calls: list[str] = field(default_factory=list)
    packages: list[dict[str, bytes]] = field(default_factory=list)

    def absent_reason(self) -> str | None:
        return self.reason

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if self.fails == name:
            raise RuntimeError(f"scripted Core ML failure in {name}")

    def compile(self, package: str) -> str:
        self._step("compile")
        root = Path(package)
        self.packages.append(
            {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        )
        return package.removesuffix(".mlpackage") + ".mlmodelc"

    def load(self, compiled: str) -> Any:
        self._step("load")
        return compiled

    def plan(self, compiled: str) -> list[tuple[str, str | None]]:
        self._step("plan")
        return list(self.plan_rows)

    def predict(self, model: Any, inputs: Mapping[str, np.ndarray]) -> Mapping[str, Any]:
        self._step("predict")
        out = self.output if self.output is not None else np.zeros(self.output_shape, np.float16)
        return {"x_hat": out}
