"""The integer interpreter's path, ``cpu/wai-ops/integer`` (§3, §4): §4's answers for a set's
``wai-ops`` program (docs/int-synth-set.md), its placement (§5) and its run.

The program is loaded from the set's verified bytes once per set digest and checked whole
(docs/wai-ops.md) before anything runs; a failing one is refused with its typed error as the
cause of ``dispatch_backend_failed``. It runs on the exact engine :mod:`paths.waiops.choose`
picks; the report stays ``cpu/wai-ops/integer`` whatever the engine. The input is the decode's
symbols (§6.3), not the float latent: the medians enter as integers inside the program.
"""

from __future__ import annotations

import threading

import numpy as np

from wai_dispatch.dispatch.adapter import BackendFailed
from wai_dispatch.dispatch.offer import CPU_WAI_OPS, DispatchPath
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs, program_bytes
from wai_dispatch.paths.onnx import SHRINK_ARENA_ABOVE
from wai_dispatch.paths.tiling import Reach, plan, reach, run_tiled, waiops_layers
from wai_dispatch.paths.waiops import choose
from wai_dispatch.paths.waiops.errors import InputShapeOverLimits, WaiOpsError
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.paths.waiops.run import check_input
from wai_dispatch.setfacts.facts import ProgramFacts

CPU_WAI_OPS_NAME = str(CPU_WAI_OPS)

#: The key of this backend's program in a set's ``programs`` fact.
PROGRAM_KEY = "wai-ops"

#: A tile's peak memory per picture pixel of its window, as measured for the bmshj2018
#: program on the ONNX Runtime engine (tools/bench_tiles.py; the NumPy engine's is lower):
#: what :func:`paths.tiling.plan` sizes the tiles by.
TILE_BYTES_PER_PIXEL = 600


def program_spec(files: SetFiles) -> ProgramFacts | None:
    """The set's ``wai-ops`` program entry, when it names both files."""
    spec = files.facts.program(PROGRAM_KEY)
    if spec is None or spec.file is None or spec.weights is None:
        return None
    return spec


def load_set_program(files: SetFiles) -> Program:
    """The set's ``wai-ops/1`` program, validated and bound-checked, or a typed error."""
    spec = program_spec(files)
    if spec is None:
        raise WaiOpsError(f"set {files.digest[:16]}… names no {PROGRAM_KEY} program")
    assert spec.file is not None and spec.weights is not None
    return load_program(
        files.read(spec.file),
        files.read(spec.weights),
        rgb8_output=getattr(spec, "output_format", None) == "rgb8",
    )


class _Compiled:
    def __init__(self, program: Program, nbytes: int = 0) -> None:
        self.program = program
        self.nbytes = nbytes
        #: The engines built for it, by the engine asked for (each decoder's ``waiops_engine``).
        self.engines = choose.Engines(program, CPU_WAI_OPS_NAME)
        self.reach: Reach | None = reach(
            waiops_layers(program.operations), program.input_name, program.output_name
        )


def _to_float(out: np.ndarray) -> np.ndarray:
    """The program's RGB8 integers as the pipeline's float form (value / 255, float32)."""
    result: np.ndarray = out.astype(np.float32) / np.float32(255.0)
    return result


class WaiOpsAdapter:
    """§4's answers and the run for ``cpu/wai-ops/integer``. Programs are kept per set digest
    in ``programs`` (the program cache the decoder's adapters share; one of its own with the
    default budget when none is given); the adapter is safe to share between threads."""

    def __init__(self, programs: Programs | None = None, *, tile_bytes: int | None = None) -> None:
        self._programs: Programs = LRU(DEFAULT_PROGRAM_BYTES) if programs is None else programs
        self._lock = threading.Lock()
        self._tile_bytes = tile_bytes  # None: the job's (the decoder's setting)

    @property
    def path(self) -> DispatchPath:
        return CPU_WAI_OPS

    def absent_reason(self) -> str | None:
        return None  # NumPy is all it needs: the CPU is always there

    def unit_present(self) -> bool:
        return True

    def device(self) -> dict[str, str]:
        """Where the path runs (``wai-dispatch paths``): the CPU, and ``auto``'s rule in words
        (:mod:`paths.waiops.choose`: which engine it picks is each program's; the log names
        the engine and the CPU's int8 units at each choice). A decoder's ``waiops_engine`` is
        its own: ``wai-dispatch paths`` shows the one it asks for."""
        return {"unit": "cpu", "engine": choose.machine_engine()}

    def program_present(self, job: SynthesisJob) -> bool:
        spec = program_spec(job.set_files)
        return (
            spec is not None
            and spec.file is not None
            and spec.weights is not None
            and job.set_files.has(spec.file)
            and job.set_files.has(spec.weights)
        )

    def takes_shape(self, job: SynthesisJob) -> bool:
        """Any spatial size (the program has no fixed input shape); the channels must be the
        program's, and the job must carry its integer symbols."""
        symbols = getattr(job, "symbols", None)
        if symbols is None or not isinstance(symbols, np.ndarray) or symbols.ndim != 4:
            return False
        if symbols.shape[0] != 1 or min(symbols.shape) <= 0:
            return False
        return int(symbols.shape[1]) == self.program(job).input_channels

    def plan(self, job: SynthesisJob) -> Placement:
        """Every operation of the program on the CPU (§5: counted over the program's
        operations; it has no constants among them)."""
        return Placement(cpu=self.program(job).operation_count)

    def run(self, job: SynthesisJob) -> np.ndarray:
        """The RGB8 picture as the pipeline's float form (value / 255, float32 [1, 3, H, W]):
        ``to_rgb8`` gives back exactly the program's integers."""
        compiled = self._compiled(job)
        if job.symbols is None:  # takes_shape refuses such a job; the engines' check would too
            raise InputShapeOverLimits("wai-ops input is missing: the job carries no symbols")
        runner = compiled.engines.runner(job.waiops_engine)
        symbols = job.symbols
        r = compiled.reach
        tiles = []
        if r is not None and symbols.ndim == 4:
            budget = job.tile_bytes if self._tile_bytes is None else self._tile_bytes
            h, w = int(symbols.shape[2]), int(symbols.shape[3])
            tiles = plan(h, w, r, budget, TILE_BYTES_PER_PIXEL)
        try:
            if r is not None and len(tiles) > 1:
                # Exact arithmetic: each tile's interior is the whole decode's, bit for bit
                # (paths.tiling); the input is checked whole first, as an untiled run would.
                check_input(compiled.program, symbols)
                big = symbols.size > SHRINK_ARENA_ABOVE  # its last tile shrinks the arena

                def run(window: np.ndarray, last: bool) -> np.ndarray:
                    return runner.run(window, shrink_arena=big and last)

                return run_tiled(symbols, r, tiles, run, _to_float)
            out = runner.run(symbols)
        except WaiOpsError:
            raise
        except Exception as exc:
            raise BackendFailed(f"wai-ops: the synthesis failed: {exc}") from exc
        return _to_float(out)

    def program(self, job: SynthesisJob) -> Program:
        return self._compiled(job).program

    def _compiled(self, job: SynthesisJob) -> _Compiled:
        key = (str(self.path), job.set_files.digest)
        with self._lock:
            hit = self._programs.get(key)
            if isinstance(hit, _Compiled):
                return hit
            program = load_set_program(job.set_files)  # a typed error when there is none
            spec = program_spec(job.set_files)
            names = [] if spec is None else [str(spec.file), str(spec.weights)]
            nbytes = program_bytes(job.set_files.read(n) for n in names)
            compiled = _Compiled(program, nbytes)
            self._programs.put(key, compiled, compiled.nbytes)
            return compiled
