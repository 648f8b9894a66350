"""The ONNX Runtime path (``cpu/onnx-runtime/float``, and ``gpu/onnx-runtime/float`` through CUDA
or the WebGPU plugin, whichever :mod:`paths.onnx_providers` finds): §4's answers for a
parameter set's ``onnx-runtime`` program, its placement (§5) and its run.

``import paths.onnx`` is light: onnxruntime and onnx (to read the program's operations and
rewrite it) load on first use.

The set's manifest facts name the program::

    "programs": {"onnx-runtime": {"file": "decoder.onnx", "weights": "decoder.weights",
                                  "input": "latent", "output": "x_hat"}}

The model's initializers are ONNX external data in the ``weights`` file; both files are read
from the set's verified bytes (:meth:`SetFiles.read`), never from disk.

Errors: anything the backend raises (a model that does not parse, a session that does not
build, a run that fails) becomes :class:`dispatch.BackendFailed` with the backend's
exception as ``__cause__`` (§4: ``dispatch_backend_failed``).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from wai_dispatch.dispatch.adapter import BackendFailed
from wai_dispatch.dispatch.offer import DispatchPath
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.dispatch.tokens import Arithmetic, Backend, Unit
from wai_dispatch.paths import onnx_cache, onnx_providers
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs, program_bytes
from wai_dispatch.paths.onnx_placement import (
    _profiled_trace,
    placement_from_trace,
    placement_of_program,
    program_operations,
)
from wai_dispatch.paths.onnx_rewrite import rewrite_model
from wai_dispatch.paths.onnx_session import (
    SHRINK_ARENA_ABOVE,
    arena_shrink_options,
    configure_thread_pool,
    request_thread_pool,
    run_options,
    shared_session_options,
)
from wai_dispatch.paths.tiling import Reach, onnx_layers, plan, reach, run_tiled

__all__ = [
    "PROGRAM_KEY",
    "SHRINK_ARENA_ABOVE",
    "OnnxRuntimeAdapter",
    "arena_shrink_options",
    "configure_thread_pool",
    "placement_from_trace",
    "placement_of_program",
    "program_operations",
    "request_thread_pool",
    "shared_session_options",
]

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
    """§4's answers and the run for ``<unit>/onnx-runtime/float``.

    The placement (§5) counts the operations of the set's program (constants left out), each
    on the unit whose execution provider ran the nodes derived from it: a session built from
    the very graph that runs (after the sub-pixel rewrite, when on) with the same options is
    run once with profiling on, and its trace says which provider ran each runtime node
    (:func:`placement_of_program`; docs/onnx-path.md).

    ``rewrite`` replaces each exact-splittable strided ConvTranspose (bmshj2018's k5 s2 p2
    op1) by regular Convs and an interleave of their phases (``glue``: ``"split"``, one Conv
    per phase with only its taps and a 0/1 grouped ConvTranspose; ``"shuffle"``, one Conv
    for all phases and the same ConvTranspose; or ``"depth-to-space"``) before the session is built
    (:mod:`paths.onnx_rewrite`).
    Sessions are kept per set digest in ``programs`` (the program cache the decoder's adapters
    share, keyed by ``(path, digest)``; a cache of its own with the default budget when none
    is given), least recently used out first; the adapter is safe to share between threads.
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
        a hardware GPU (:mod:`paths.onnx_providers`; a software adapter is not a GPU)."""
        return self._stuck or onnx_providers.absent_reason(self._unit)

    def device(self) -> dict[str, object]:
        """The unit, and for the GPU the provider and device discovery found (``paths``)."""
        return onnx_providers.device(self._unit)

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

        configure = functools.partial(onnx_providers.configure, self._unit)

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
                session, inp, out, shape, events = onnx_providers.within_deadline(build)
            except onnx_providers.SessionTimeout as exc:
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
