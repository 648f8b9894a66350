"""The ``gpu/wgsl/integer`` path's adapter: §4's answers for a set's ``wai-ops`` program run by
the WGSL kernels, its placement (§5) and its run (docs/wai-ops.md).

Every operation's kernel plan is checked against the device's real limits before anything is
submitted (no variant: ``dispatch_shape_mismatch``). A software adapter (type ``CPU``, e.g.
lavapipe) places every operation on ``cpu``, so §5 refuses the path; a GPU places them on
``gpu``. Anything the backend raises → :class:`dispatch.BackendFailed`, and the device and all
cached on it are dropped. Pipelines are cached per WGSL source, weights per (set digest, device).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wai_dispatch.dispatch.adapter import BackendFailed
from wai_dispatch.dispatch.offer import GPU_WGSL, DispatchPath
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs, program_bytes
from wai_dispatch.paths.waiops import adapter as waiops_adapter
from wai_dispatch.paths.waiops.run import check_input
from wai_dispatch.paths.wgsl.descriptor import ShapeRefused
from wai_dispatch.paths.wgsl.execute import plan_program, run_program
from wai_dispatch.paths.wgsl.runner import Runner, UnitAbsent


@dataclass
class _Loaded:
    program: Any
    nbytes: int = 0  # as the program cache counts it (paths.lru.program_bytes)
    constants: dict[tuple[str, str], Any] = field(default_factory=dict)


class WgslAdapter:
    """§4's answers and the run for ``gpu/wgsl/integer``; safe to share between threads. Each
    set's program and its weight buffers are kept in ``programs`` (the program cache the
    decoder's adapters share; one of its own with the default budget when none is given)."""

    def __init__(
        self, acquire: Callable[[], Runner] = Runner.acquire, programs: Programs | None = None
    ) -> None:
        self._acquire = acquire
        self._runner: Runner | None = None
        self._absent: str | None = None
        self._programs: Programs = LRU(DEFAULT_PROGRAM_BYTES) if programs is None else programs
        self._lock = threading.RLock()
        self.last_refusal: str | None = None

    @property
    def path(self) -> DispatchPath:
        return GPU_WGSL

    # the device -------------------------------------------------------------------------------

    def runner(self) -> Runner | None:
        """The device, acquired on first use (and again after a failure); ``None`` if absent."""
        with self._lock:
            if self._runner is None and self._absent is None:
                try:
                    self._runner = self._acquire()
                except UnitAbsent as exc:
                    self._absent = str(exc)
            return self._runner

    def absent_reason(self) -> str | None:
        """Why there is no WebGPU device here, in words; ``None`` when there is one."""
        return None if self.runner() is not None else self._absent

    def device(self) -> Mapping[str, str] | None:
        """The adapter found (``wai-dispatch paths --json``), and the unit its type places
        every operation on."""
        runner = self.runner()
        if runner is None:
            return None
        return {**runner.info, "operations_on": self._unit(runner)}

    def unit_present(self) -> bool:
        return self.runner() is not None

    # the program ------------------------------------------------------------------------------

    def program_present(self, job: SynthesisJob) -> bool:
        spec = waiops_adapter.program_spec(job.set_files)  # the set's typed facts: file and weights
        return (
            spec is not None
            and job.set_files.has(str(spec.file))
            and job.set_files.has(str(spec.weights))
        )

    def takes_shape(self, job: SynthesisJob) -> bool:
        """Every operation's kernel admits the shapes on this device's limits."""
        symbols = getattr(job, "symbols", None)
        runner = self.runner()
        if runner is None or not isinstance(symbols, np.ndarray) or symbols.ndim != 4:
            return False
        program = self._loaded(job).program
        if symbols.shape[0] != 1 or int(symbols.shape[1]) != program.input_channels:
            return False
        try:
            plan_program(program, symbols.shape, runner.limits)
        except ShapeRefused as exc:
            self.last_refusal = str(exc)
            return False
        return True

    def plan(self, job: SynthesisJob) -> Placement:
        runner = self.runner()
        count = len(self._loaded(job).program.operations)
        unit = self._unit(runner) if runner is not None else "unknown"
        return Placement(**{unit: count})

    def run(self, job: SynthesisJob) -> np.ndarray:
        runner = self.runner()
        if runner is None:
            raise BackendFailed(f"wgsl: no WebGPU adapter ({self._absent})")
        loaded = self._loaded(job)
        symbols = job.symbols
        # the interpreter's input checks: shape, limits, every value in the declared range
        symbols = check_input(loaded.program, symbols)
        if symbols is None:  # only without the interpreter's checks; takes_shape refused it
            raise BackendFailed("wgsl: the job carries no symbols")
        try:
            out = run_program(runner, loaded.program, symbols, loaded.constants)
        except BackendFailed:
            self._drop(runner)
            raise
        except ShapeRefused as exc:  # takes_shape said yes: the limits cannot have changed
            raise BackendFailed(f"wgsl: {exc}") from exc
        return out.astype(np.float32) / np.float32(255.0)

    # caches -----------------------------------------------------------------------------------

    @staticmethod
    def _unit(runner: Runner) -> str:
        if runner.is_gpu:
            return "gpu"
        return "cpu" if runner.adapter_type == "CPU" else "unknown"

    def _drop(self, runner: Runner) -> None:
        """Forget a device that failed, and the weight buffers on it: the next decode
        acquires a fresh device."""
        with self._lock:
            if self._runner is runner:
                self._runner = None
                for key in self._programs.entries():
                    if key[0] == str(self.path):
                        self._programs.pop(key)

    def _loaded(self, job: SynthesisJob) -> _Loaded:
        key = (str(self.path), job.set_files.digest)
        with self._lock:
            hit = self._programs.get(key)
            if isinstance(hit, _Loaded):
                return hit
            try:
                program = waiops_adapter.load_set_program(job.set_files)
            except Exception as exc:  # a typed WaiOpsError: kept as the cause
                raise BackendFailed(f"wgsl: the wai-ops program does not load: {exc}") from exc
            spec = waiops_adapter.program_spec(job.set_files)
            names = [] if spec is None else [str(spec.file), str(spec.weights)]
            loaded = _Loaded(program, program_bytes(job.set_files.read(n) for n in names))
            self._programs.put(key, loaded, loaded.nbytes)
            return loaded
