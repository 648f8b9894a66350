"""The platform's model runtime on the neural processor: Core ML, path ``npu/model-runtime/float``
(§6.1). Runs only on macOS 14.4 or later; everywhere else the unit is absent (§4).

The adapter asks a :class:`CoreMLRuntime`: :class:`NativeCoreML` drives coremltools' runtime,
tests inject a :class:`ScriptedCoreML`, so everything but the runtime itself is tested on Linux.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_dispatch.dispatch import NPU_MODEL_RUNTIME, BackendFailed, DispatchPath, Placement
from wai_dispatch.paths.coreml_runtime import (
    MIN_MACOS,
    CoreMLRuntime,
    NativeCoreML,
    ScriptedCoreML,
    coreml_absent_reason,
)
from wai_dispatch.paths.coreml_set import (
    FACTS_KEY,
    SPEC_FILE,
    WEIGHTS_FILE,
    ProgramFiles,
    ProgramInput,
    placement_from_plan,
    program_shape,
    read_program_input,
    write_package,
)
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs, program_bytes

__all__ = [
    "FACTS_KEY",
    "MIN_MACOS",
    "SPEC_FILE",
    "WEIGHTS_FILE",
    "CoreMLAdapter",
    "CoreMLRuntime",
    "NativeCoreML",
    "ProgramFiles",
    "ProgramInput",
    "ScriptedCoreML",
    "coreml_absent_reason",
    "placement_from_plan",
    "program_shape",
    "read_program_input",
    "write_package",
]


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
