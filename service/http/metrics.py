"""The service's Prometheus metrics, on a registry of its own (one per app), by the client
library's conventions: counters end in ``_total``, a build-info gauge, the process collector,
and prometheus-client's multiprocess mode when ``serve --workers N`` runs several processes.

Values read from the service's parts (queue depth, the program cache's counts, the spool) are
*sampled*: :meth:`Metrics.sample` sets each bound gauge from its function and adds to each
bound counter what its monotonic source gained since the last sample. A scrape samples first.
In multiprocess mode every process also samples once a second (a daemon thread), since a scrape
reaches one process and prometheus-client aggregates the others from the files they last wrote
(gauges by the mode each declares: sums of live processes for queues and memory, the most
recent for calibrations, the minimum for ``wai_store_up``).
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
    values,
)

from wai_dispatch import __version__
from wai_dispatch.service.usecase.decode import DecodeDone, NoPathFound

_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

#: The gauges sampled from the service's parts (:meth:`Metrics.bind`), by the name the app binds
#: them under: the metric, its help, and how multiprocess mode joins the processes' values.
_SAMPLED_GAUGES = {
    "queue_depth": ("wai_queue_depth", "Decodes admitted, waiting", "livesum"),
    "running": ("wai_decodes_running", "Decodes running", "livesum"),
    "spool_bytes": ("wai_spool_bytes", "Bytes of reports spooled", "livemax"),
    "store_up": ("wai_store_up", "1 when the report store answers", "livemin"),
    "inbox_reports": (
        "wai_rollup_inbox_reports",
        "Reports stored but not yet folded into the roll-ups (the report inbox's depth)",
        "livemax",
    ),
    "inbox_oldest_seconds": (
        "wai_rollup_inbox_oldest_seconds",
        "Age of the oldest report not yet folded into the roll-ups (0: none)",
        "livemax",
    ),
    "seconds_per_pixel": (
        "wai_decode_seconds_per_pixel",
        "Decode time per output pixel measured here; calibrates the time estimate",
        "livemostrecent",
    ),
    "memory_held": (
        "wai_memory_held_bytes",
        "Bytes admission counts against the memory budget (estimates or resident growth)",
        "livesum",
    ),
    "cache_bytes": ("wai_program_cache_bytes", "Bytes of programs held", "livesum"),
}
#: The counters sampled from a monotonic source (:meth:`Metrics.bind_counter`): the metric and
#: its help.
_SAMPLED_COUNTERS = {
    "cache_hits": ("wai_program_cache_hits", "Program cache hits"),
    "cache_misses": ("wai_program_cache_misses", "Program cache misses"),
    "cache_evictions": ("wai_program_cache_evictions", "Programs evicted for the byte budget"),
}


def multiprocess_on() -> bool:
    """Whether prometheus-client chose its multiprocess values in this process: it does when
    ``PROMETHEUS_MULTIPROC_DIR`` names a folder as it is imported, which ``serve --workers N``
    sets (a fresh folder, ``<data_dir>/metrics/<pid>``) before its workers start."""
    return values.ValueClass is not values.MutexValue


class Metrics:
    """Decodes by path and tier, refusals by code, errors by code, latency by path, queue depth,
    spool size, the calibrated seconds per pixel, the memory admission counts, the program
    cache's counters, the build and (one process) the process collector."""

    def __init__(self) -> None:
        self.multiprocess = multiprocess_on()
        self.registry = CollectorRegistry()
        r = self.registry
        self.decodes = Counter(
            "wai_decodes",
            "Reports stored, by the path that ran (none) and its tier",
            ["path", "tier", "outcome"],
            registry=r,
        )
        self.refusals = Counter(
            "wai_refusals", "Paths refused in reports, by §7 code", ["code"], registry=r
        )
        self.errors = Counter(
            "wai_request_errors", "Requests answered with an error, by code", ["code"], registry=r
        )
        self.decode_seconds = Histogram(
            "wai_decode_seconds",
            "Time of one decode in the worker pool, by the path that ran",
            ["path"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.request_seconds = Histogram(
            "wai_decode_request_seconds",
            "Time of POST /v1/decode, queueing included",
            buckets=_BUCKETS,
            registry=r,
        )
        self._sampled_gauges = {name: self._gauge(*spec) for name, spec in _SAMPLED_GAUGES.items()}
        self._sampled_counters = {
            name: Counter(*spec, registry=r) for name, spec in _SAMPLED_COUNTERS.items()
        }
        build = self._gauge(
            "wai_build_info", "The running build (always 1)", "max", ["version", "python"]
        )
        build.labels(__version__, platform.python_version()).set(1)
        if not self.multiprocess:
            r.register(ProcessCollector(registry=None))
        self._gauges: dict[str, Callable[[], float]] = {}
        self._counters: dict[str, tuple[Callable[[], float], list[float]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if self.multiprocess:
            threading.Thread(target=self._sampler, name="metrics-sampler", daemon=True).start()

    def decode_done(self, outcome: DecodeDone | NoPathFound, seconds: float) -> None:
        """A decode's stored records, by path, tier and outcome, and their refusals by code;
        the decode's time where a path ran; ``POST /v1/decode``'s time (``seconds``); a no
        path counted as its error (the use case's :class:`~service.usecase.decode.Meter`; a
        refused request is counted where its error is answered, by the app's handler)."""
        for rec in outcome.records:
            self.decodes.labels(rec.path_ran or "none", rec.tier or "none", rec.outcome).inc()
            for refusal in rec.refusals:
                self.refusals.labels(refusal.code).inc()
        if isinstance(outcome, DecodeDone):
            ran = outcome.records[-1].path_ran or "none"
            self.decode_seconds.labels(ran).observe(outcome.seconds)
        else:
            self.errors.labels(outcome.code).inc()
        self.request_seconds.observe(seconds)

    def _gauge(self, name: str, doc: str, mode: str, labels: list[str] | None = None) -> Gauge:
        return Gauge(
            name,
            doc,
            labels or [],
            registry=self.registry,
            multiprocess_mode=mode,  # type: ignore[arg-type]
        )

    def bind(self, name: str, fn: Callable[[], float]) -> None:
        """Sample gauge ``name`` from ``fn`` (at each scrape, and each second in
        multiprocess mode)."""
        if name not in self._sampled_gauges:
            raise TypeError(f"{name} is not a sampled gauge")
        self._gauges[name] = fn

    def bind_counter(self, name: str, fn: Callable[[], float]) -> None:
        """Add to counter ``name`` what the monotonic ``fn`` gained since the last sample."""
        if name not in self._sampled_counters:
            raise TypeError(f"{name} is not a sampled counter")
        self._counters[name] = (fn, [0.0])

    def sample(self) -> None:
        with self._lock:
            for name, fn in self._gauges.items():
                self._sampled_gauges[name].set(fn())
            for name, (fn, last) in self._counters.items():
                now = fn()
                if now > last[0]:
                    self._sampled_counters[name].inc(now - last[0])
                last[0] = max(last[0], now)

    def _sampler(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def exposition(self) -> bytes:
        """The text format of every metric: this process's, or in multiprocess mode every
        process's, aggregated from their files."""
        self.sample()
        if not self.multiprocess:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return generate_latest(merged)

    def close(self) -> None:
        """Stop sampling; in multiprocess mode this process's live gauges leave the sums."""
        self._stop.set()
        if self.multiprocess:
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
