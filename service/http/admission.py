"""Admission: what a decode will cost, read from the payload headers before anything is
allocated, and the bounded worker pool decodes run in (never on the event loop).

A decode is refused with a 4xx naming the limit when its latent, its memory estimate or its
time estimate is over the configured limit; with 429 and ``Retry-After`` when the queue is full
or the memory budget is taken: by the estimates of decodes already admitted, or by what the
process holds (its resident memory above what it held when admission began, where that is
more: a runtime's arena, a cache, a decode that outlived its timeout); with 503
``queue_timeout`` and ``Retry-After`` when it waited in the queue ``decode_timeout_s`` without
starting (it never runs, so no report is stored); with 504 when it runs past the per-decode
timeout, counted from when it started (its thread finishes on its own, its slot and memory
held until then).

The estimate is service/decoding/prepare.py's (the CLI's local decode applies the same);
its time is calibrated here by the decodes admission ran: an exponentially weighted mean of
each decode's running seconds per output pixel (decodes of at least ``CALIBRATE_MIN_PIXELS``,
where the fixed cost of a decode does not dominate), starting from the constant and held
between ``SCALE_BOUNDS`` times it, so one outlier cannot refuse everything.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from wai_dispatch.service.decoding.errors import LatentOverLimit, MemoryOverBudget, TimeOverLimit
from wai_dispatch.service.decoding.prepare import SECONDS_PER_PIXEL, Estimate
from wai_dispatch.service.http.errors import (
    DecodeTimeout,
    MemoryBusy,
    QueueFull,
    QueueTimeout,
)

T = TypeVar("T")

#: The smallest decode whose running time calibrates the time estimate.
CALIBRATE_MIN_PIXELS = 256 * 256
#: The weight of one measured decode in the calibrated seconds per pixel.
CALIBRATE_WEIGHT = 0.2
#: The calibrated seconds per pixel stays within these multiples of the constant.
SCALE_BOUNDS = (0.25, 8.0)


def resident_bytes() -> int | None:
    """The process's resident memory in bytes (Linux: ``/proc/self/statm``'s resident pages
    times the page size); ``None`` where there is no such file (macOS): admission then counts
    only the estimates of decodes in flight."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


class Admission:
    """At most ``workers`` decodes run and ``queue`` wait; their memory estimates together, or
    the process's resident growth where that is more, stay within ``memory_budget``.
    ``resident`` reads the process's resident bytes (injectable for tests)."""

    def __init__(
        self,
        *,
        workers: int,
        queue: int,
        memory_budget: int,
        timeout_s: float,
        max_latent_elements: int,
        resident: Callable[[], int | None] = resident_bytes,
    ) -> None:
        self.workers = workers
        self.capacity = workers + queue
        self.memory_budget = memory_budget
        self.timeout_s = timeout_s
        self.max_latent_elements = max_latent_elements
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decode")
        self._lock = threading.Lock()
        self.inflight = 0
        self.running = 0
        self.reserved = 0
        self._mean_s = 0.25
        self._resident = resident
        self.resident_base: int | None = None  # read when the first decode is admitted
        self.seconds_per_pixel = SECONDS_PER_PIXEL

    def held(self) -> int:
        """The bytes counted against the budget: the estimates of decodes in flight, or the
        process's resident memory above its baseline where that is more. The baseline is
        what the process held when first asked (the first decode admitted or ``/metrics``
        scraped, the service started): a runtime's import, its sessions and arenas count
        from then on."""
        now = self._resident()
        if now is None:
            return self.reserved
        if self.resident_base is None:
            self.resident_base = now
        return max(self.reserved, now - self.resident_base)

    def seconds(self, est: Estimate) -> float:
        """``est``'s time, scaled by this machine's measured seconds per pixel."""
        return est.seconds * (self.seconds_per_pixel / SECONDS_PER_PIXEL)

    def measured(self, pixels: int, took: float) -> None:
        """Calibrate the seconds per pixel with a decode of ``pixels`` that ran ``took`` s."""
        if pixels < CALIBRATE_MIN_PIXELS or took < 0:
            return
        low, high = (b * SECONDS_PER_PIXEL for b in SCALE_BOUNDS)
        with self._lock:
            mean = (1 - CALIBRATE_WEIGHT) * self.seconds_per_pixel
            mean += CALIBRATE_WEIGHT * took / pixels
            self.seconds_per_pixel = min(high, max(low, mean))

    @property
    def waiting(self) -> int:
        return max(0, self.inflight - self.running)

    def check(self, est: Estimate) -> None:
        """Refuse a decode that no amount of waiting would admit, naming the limit."""
        if est.latent_elements > self.max_latent_elements:
            raise LatentOverLimit(
                f"the latent has {est.latent_elements} elements, over the limit "
                f"max_latent_elements={self.max_latent_elements}",
            )
        if est.memory_bytes > self.memory_budget:
            raise MemoryOverBudget(
                f"a {est.pixels}-pixel decode needs about {est.memory_bytes >> 20} MiB, over "
                f"the limit memory_budget_bytes={self.memory_budget} "
                f"({self.memory_budget >> 20} MiB)",
            )
        seconds = self.seconds(est)
        if seconds > self.timeout_s:
            raise TimeOverLimit(
                f"a {est.pixels}-pixel decode takes about {seconds:.1f} s on this machine "
                f"({self.seconds_per_pixel * 1e6:.2f} µs per pixel, measured), over the limit "
                f"decode_timeout_s={self.timeout_s:g}",
            )

    def _retry_after(self) -> int:
        return max(1, math.ceil(self._mean_s * (self.inflight + 1) / self.workers))

    def _reserve(self, est: Estimate) -> None:
        with self._lock:
            if self.inflight >= self.capacity:
                raise QueueFull(
                    f"{self.inflight} decodes running or queued (limit workers+queue="
                    f"{self.capacity}); retry later",
                    retry_after_s=self._retry_after(),
                )
            held = self.held()
            if held + est.memory_bytes > self.memory_budget:
                raise MemoryBusy(
                    f"decodes admitted and the process hold {held >> 20} MiB of the "
                    f"memory_budget_bytes={self.memory_budget >> 20} MiB; this decode needs "
                    f"about {est.memory_bytes >> 20} MiB more; retry later",
                    retry_after_s=self._retry_after(),
                )
            self.inflight += 1
            self.reserved += est.memory_bytes

    def _release(self, est: Estimate) -> None:
        with self._lock:
            self.inflight -= 1
            self.reserved -= est.memory_bytes

    async def run(self, est: Estimate, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the pool once ``est`` is admitted; raise a typed error otherwise."""
        self.check(est)
        self._reserve(est)

        loop = asyncio.get_running_loop()
        began: asyncio.Future[float] = loop.create_future()

        def started(at: float) -> None:
            if not began.done():
                began.set_result(at)

        def work() -> T:
            start = time.perf_counter()
            with self._lock:
                self.running += 1
            loop.call_soon_threadsafe(started, start)
            try:
                return fn()
            finally:
                took = time.perf_counter() - start
                with self._lock:
                    self.running -= 1
                    self._mean_s = 0.8 * self._mean_s + 0.2 * took

        try:
            future = self.pool.submit(work)
        except BaseException:
            self._release(est)
            raise
        future.add_done_callback(lambda _f: self._release(est))
        result = asyncio.wrap_future(future)
        # Queued: it must start within timeout_s, or it is refused before it runs.
        either: set[asyncio.Future[Any]] = {began, result}
        await asyncio.wait(either, timeout=self.timeout_s)
        if not began.done() and not result.done() and future.cancel():
            raise QueueTimeout(
                f"the decode could not start within decode_timeout_s={self.timeout_s:g} "
                f"({self.waiting} queued); nothing ran, retry later",
                retry_after_s=self._retry_after(),
            )
        # Running: timeout_s counts from when it started.
        t0 = began.result() if began.done() else time.perf_counter()
        left = max(0.0, self.timeout_s - (time.perf_counter() - t0))
        try:
            return await asyncio.wait_for(asyncio.shield(result), left)
        except TimeoutError:
            raise DecodeTimeout(
                f"the decode ran past decode_timeout_s={self.timeout_s:g}",
            ) from None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
