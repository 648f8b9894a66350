"""Which exact engine runs a ``wai-ops/1`` program: the one place that decides (docs/wai-ops.md,
"Engines"). Every engine computes the program's integers bit for bit; the choice is speed only.

- ``int8-graph``: the whole program as one ONNX Runtime graph whose convolutions are
  ``ConvInteger`` on the CPU's int8 units (:class:`~paths.waiops.int8_graph.Int8GraphEngine`),
  for a program whose plane recombination it proves inside int32: ``auto`` takes it for every
  program past 2^24 (the hyperprior's hyper-synthesis), and for a float32-exact one where its
  own count of int8 products a multiply-accumulate
  (:func:`~paths.waiops.int8_graph.products_per_mac`, what ``int_synth_quality`` prints) is
  at most :data:`INT8_GRAPH_PER_MAC` (1.5): a program designed for the units (the bundled
  int8-units set, 1.065: one plane by one digit nearly everywhere);
- ``float32``: the program as one float32-exact ONNX Runtime graph
  (:class:`~paths.waiops.onnx_engine.OnnxEngine`), for a float32-exact program (every bound
  below 2^24) whose int8 count is above the threshold (the retired ``int-synth-demo-q3``,
  2.41: two planes × up to two digits) or that the int8 graph refuses;
- ``int8``: the same products through ``MatMulInteger`` with NumPy between them
  (:class:`~paths.waiops.int8_engine.Int8Engine`), for any program the bound rule admits;
- ``numpy``: the float64/float32 NumPy engine (:class:`~paths.waiops.engine.Engine`), where
  ONNX Runtime is absent.

The threshold is a rule over the program, not a timing at start-up. ``python -m
wai_dispatch.tools.bench int --repeats 3 --int-set FOLDER`` on each set, both engines
interleaved in the same run (2 threads, AVX-512 VNNI, load 1.8–2.8), puts the int8 graph at
0.70 / 0.74 / 0.81 of the float32 graph's time at 256×256 / 768×512 / 1024×1024 on the 1.065
program and at 1.19 / 1.08 / 1.27 on the 2.41 one (busier, load 5.7–7.1: 0.55 / 0.77 / 1.50
and 1.22 / 1.80 / 0.81, the 1024×1024 pairs swapped by the load; docs/wai-ops.md, "Engines",
has the times). Each plane or digit past the first adds a ``ConvInteger`` and its
recombination to every convolution, so the engines break even between the two counts; 1.5
lies between them.

The ``waiops_engine`` setting (``WAI_WAIOPS_ENGINE``: ``int8-graph``, ``int8``, ``float32``,
``numpy``; ``auto``:
the rule above) forces one for a decoder (tests, benchmarks), for every program it runs: the
decoder's decodes' jobs carry it (:attr:`paths.job.SynthesisJob.waiops_engine`), its hyperprior
entropy stage is passed it, and each program's :class:`Engines` builds it, so that one
decoder's choice is no other's (no process-wide state). A forced engine that cannot take the
program falls back by the rule, and the log says so. Whichever runs, the output is the same
bytes."""

from __future__ import annotations

import importlib
import logging
import platform
import threading
from typing import Protocol

import numpy as np

from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.int8_engine import Int8Engine, NotInt8Exact
from wai_dispatch.paths.waiops.int8_graph import (
    Int8GraphEngine,
    NotGraphExact,
    build_model,
    products_per_mac,
)
from wai_dispatch.paths.waiops.onnx_engine import OnnxEngine, SqrtNotExact
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.setfacts.limits import Limits

log = logging.getLogger(__name__)

ENGINES = ("int8-graph", "int8", "float32", "numpy")


class Runner(Protocol):
    """What a caller asks of an engine."""

    def run(
        self, symbols: np.ndarray, limits: Limits | None = None, *, shrink_arena: bool = False
    ) -> np.ndarray: ...


def check_engine(name: str) -> str:
    """``name`` if it is one of :data:`ENGINES` or ``auto``, else a :class:`ValueError`."""
    if name != "auto" and name not in ENGINES:
        raise ValueError(f"no wai-ops engine {name!r}; one of auto, {', '.join(ENGINES)}")
    return name


#: The int8 dot-product units MLAS picks its kernels by, strongest first, as NumPy's runtime
#: CPU detection names them (x86-64's CPUID; Arm's auxiliary vector).
_UNITS = (
    ("AVX512VNNI", "avx512_vnni"),
    ("AVX512BW", "avx512bw"),
    ("AVX2", "avx2"),
    ("SSE41", "sse4_1"),
    ("ASIMDDP", "asimddp"),
)


def int8_units() -> str:
    """The CPU's int8 dot-product instructions as this process sees them, in words: what
    ``wai-dispatch paths`` and the chooser's log show beside the engine. They are read as the
    kernel (MLAS) reads them, from the CPU's own answer (CPUID), through NumPy's runtime
    detection, not from ``/proc/cpuinfo``, which under emulation names the host's. Units NumPy
    has no name for (the VEX AVX-VNNI, AMX, Arm's i8mm) are not shown; with none, the machine's
    name only."""
    try:
        seen = importlib.import_module("numpy._core._multiarray_umath").__cpu_features__
    except (ImportError, AttributeError):  # NumPy 1.x
        seen = importlib.import_module("numpy.core._multiarray_umath").__cpu_features__
    found = [name for key, name in _UNITS if seen.get(key)]
    return " ".join(found[:2]) or platform.machine() or "unknown"


def _onnxruntime() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


#: ``auto`` runs a float32-exact program on ``int8-graph`` where that engine's own count of int8
#: products a multiply-accumulate (:func:`~paths.waiops.int8_graph.products_per_mac`, what
#: ``int_synth_quality`` prints) is at or below this, on ``float32`` above it (module docstring).
INT8_GRAPH_PER_MAC = 1.5

#: ``auto``'s rule in a few words (``wai-dispatch paths``, where no program is at hand).
AUTO_RULE = f"int8-graph ≤ {INT8_GRAPH_PER_MAC} products/MAC, else float32"


def machine_engine(want: str = "auto", program: Program | None = None) -> str:
    """The engine ``program`` gets on this machine when ``want`` is asked for (a decoder's
    ``waiops_engine``; ``wai-dispatch paths``), by the rule, without building it; with no
    program, ``auto`` is the rule in words (:data:`AUTO_RULE`): which engine it picks is the
    program's."""
    check_engine(want)
    if not _onnxruntime():
        return "numpy"
    if want != "auto":
        return want
    if program is None:
        return AUTO_RULE
    if not program.float32_exact:
        return "int8-graph"
    try:
        _, products = build_model(program)
    except NotGraphExact:
        return "float32"
    return "int8-graph" if products_per_mac(program, products) <= INT8_GRAPH_PER_MAC else "float32"


def build(program: Program, where: str = "wai-ops", want: str = "auto") -> Runner:
    """The exact engine for ``program`` (module docstring), ``want`` first where it can take
    the program (a decoder's ``waiops_engine``; ``auto``: the rule), built; logged once per
    build."""
    check_engine(want)
    order: list[str] = [want] if want != "auto" else []
    if program.float32_exact:
        order += ["float32", "int8-graph", "int8", "numpy"]
    else:
        order += ["int8-graph", "int8", "numpy"]
    runner: Runner | None = None
    chosen = "numpy"
    if want == "auto" and program.float32_exact:  # the rule: int8-graph where it is cheap
        runner = _try("int8-graph", program)
        if isinstance(runner, Int8GraphEngine) and runner.per_mac <= INT8_GRAPH_PER_MAC:
            chosen, order = "int8-graph", []
        else:
            runner = None
    for name in order:
        runner = _try(name, program)
        if runner is not None:
            chosen = name
            break
    if want not in ("auto", chosen):
        log.warning(
            "%s: waiops_engine=%s cannot take this program; %s runs it", where, want, chosen
        )
    log.info(
        "%s: the %s engine runs the program (%d operations; CPU int8 units: %s)",
        where,
        chosen,
        program.operation_count,
        int8_units(),
    )
    return runner if runner is not None else Engine(program)


class Engines:
    """One program's engines, each built by :func:`build` the first time it is asked for:
    every ``wai-ops/1`` program a decoder runs (the image program of ``cpu/wai-ops/integer``,
    a hyperprior set's ``h_s``) takes its engine from here, by the decoder's ``waiops_engine``,
    so one setting reaches them all. Thread-safe; decoders that share the program share it."""

    def __init__(self, program: Program, where: str) -> None:
        self.program = program
        self.where = where
        self._built: dict[str, Runner] = {}
        self._lock = threading.Lock()

    def runner(self, want: str = "auto") -> Runner:
        with self._lock:
            engine = self._built.get(want)
            if engine is None:
                engine = self._built[want] = build(self.program, self.where, want)
            return engine


def engine_name(runner: object) -> str:
    """An engine's name as :func:`build` chose it."""
    if isinstance(runner, Int8GraphEngine):
        return "int8-graph"
    if isinstance(runner, Int8Engine):
        return "int8"
    return "numpy" if isinstance(runner, Engine) else "float32"


def _try(name: str, program: Program) -> Runner | None:
    if name == "numpy":
        return Engine(program)
    if not _onnxruntime():
        return None
    if name == "float32":
        if not program.float32_exact:
            return None
        try:
            return OnnxEngine(program)
        except SqrtNotExact:  # this build's square root is not correctly rounded
            return None
    if name == "int8-graph":
        try:
            return Int8GraphEngine(program)
        except (NotGraphExact, SqrtNotExact):
            return None
    try:
        return Int8Engine(program)
    except NotInt8Exact:
        return None
