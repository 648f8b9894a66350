"""ONNX Runtime in this process: its one thread pool (every session of the ONNX path runs on it;
its size the ``ort_threads`` setting, else the CPUs), the session options on that pool, the
runtime's own log kept to fatal errors, and the run options that hand a large decode's arena
back. ``import paths.onnx_session`` is light: onnxruntime loads on first use.

The pool is the one process-wide state a decoder's assembly sets (docs/onnx-path.md): sessions
share it by design."""

from __future__ import annotations

import os
import threading
from typing import Any

from wai_dispatch.paths.job import SynthesisJob

__all__ = [
    "SHRINK_ARENA_ABOVE",
    "arena_shrink_options",
    "configure_thread_pool",
    "request_thread_pool",
    "run_options",
    "shared_session_options",
]

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
