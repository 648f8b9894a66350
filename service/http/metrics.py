"""The service's Prometheus metrics, on a registry of its own (one per app)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """Decodes by path and tier, refusals by code, errors by code, latency, queue depth,
    spool size, the calibrated seconds per pixel, the memory admission counts and the program
    cache's counters."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.decodes = Counter(
            "wai_decodes", "Reports stored, by the path that ran (none) and its tier",
            ["path", "tier", "outcome"], registry=r,
        )  # fmt: skip
        self.refusals = Counter(
            "wai_refusals", "Paths refused in reports, by §7 code", ["code"], registry=r
        )
        self.errors = Counter(
            "wai_request_errors", "Requests answered with an error, by code", ["code"], registry=r
        )
        self.decode_seconds = Histogram(
            "wai_decode_seconds", "Time of one decode in the worker pool",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=r,
        )  # fmt: skip
        self.request_seconds = Histogram(
            "wai_decode_request_seconds", "Time of POST /v1/decode, queueing included",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge("wai_queue_depth", "Decodes admitted, waiting", registry=r)
        self.running = Gauge("wai_decodes_running", "Decodes running", registry=r)
        self.spool_bytes = Gauge("wai_spool_bytes", "Bytes of reports spooled", registry=r)
        self.store_up = Gauge("wai_store_up", "1 when the report store answers", registry=r)
        self.seconds_per_pixel = Gauge(
            "wai_decode_seconds_per_pixel",
            "Decode time per output pixel measured here; calibrates the time estimate",
            registry=r,
        )
        self.memory_held = Gauge(
            "wai_memory_held_bytes",
            "Bytes admission counts against the memory budget (estimates or resident growth)",
            registry=r,
        )
        self.cache_hits = Gauge("wai_program_cache_hits", "Program cache hits", registry=r)
        self.cache_misses = Gauge("wai_program_cache_misses", "Program cache misses", registry=r)
        self.cache_evictions = Gauge(
            "wai_program_cache_evictions", "Programs evicted for the byte budget", registry=r
        )
        self.cache_bytes = Gauge("wai_program_cache_bytes", "Bytes of programs held", registry=r)

    def bind(self, name: str, fn: Callable[[], float]) -> None:
        """Read gauge ``name`` from ``fn`` at each scrape."""
        gauge = getattr(self, name)
        gauge.set_function(fn)
