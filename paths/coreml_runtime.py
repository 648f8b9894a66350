"""Core ML itself, behind one Protocol (:class:`CoreMLRuntime`): the native runtime
(:class:`NativeCoreML`, coremltools on macOS 14.4 or later) and a scripted one
(:class:`ScriptedCoreML`: a plan and outputs chosen in advance, for tests on any platform).
Where it is absent, :func:`coreml_absent_reason` says why."""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

__all__ = ["MIN_MACOS", "CoreMLRuntime", "NativeCoreML", "ScriptedCoreML", "coreml_absent_reason"]

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
