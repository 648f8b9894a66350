"""Admission: what a decode will cost, read from the payload headers before anything is
allocated, and the bounded worker pool decodes run in (never on the event loop).

A decode is refused with a 4xx naming the limit when its latent, its memory estimate or its
time estimate is over the configured limit; with 429 and ``Retry-After`` when the queue is full
or the memory budget is taken by decodes already admitted; with 503 ``queue_timeout`` and
``Retry-After`` when it waited in the queue ``decode_timeout_s`` without starting (it never
runs, so no report is stored); with 504 when it runs past the per-decode timeout, counted from
when it started (its thread finishes on its own, its slot and memory held until then).

The estimate (measured on this machine with the bmshj2018 synthesis, tools/bench_service.py):
a decode's memory grows linearly with the picture, about 520 bytes per output pixel (256×256:
32 MB, 1024×1024: 548 MB over a warm process); the estimate keeps a margin, 64 MiB + 560 bytes
per pixel. Time is about 1.7 µs per pixel on 2 quiet cores.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.service.decoding.parts import Prepared
from wai_dispatch.service.http.errors import ServiceError

T = TypeVar("T")

BASE_BYTES = 64 * 1024 * 1024
BYTES_PER_PIXEL = 560
SECONDS_PER_PIXEL = 1.7e-6
DEFAULT_UPSAMPLING = 16


@dataclass(frozen=True)
class Estimate:
    """The largest part's latent elements and output pixels, and the decode's cost."""

    latent_elements: int
    pixels: int
    memory_bytes: int
    seconds: float


def estimate(prepared: Prepared) -> Estimate:
    """The cost of decoding an envelope from its payload headers alone, as
    :meth:`Decoder.prepare` read them (parts decode one at a time, so the dearest part is the
    decode's); a part's set, where it is installed, may state its ``upsampling``."""
    elements = pixels = 0
    for item in prepared.parts:
        header = item.header
        if header is None:
            continue  # not decodable here at all: the decoder says so, or tries the fallback
        factor = DEFAULT_UPSAMPLING
        if item.opened is not None:
            up = (item.opened.files.facts.model_extra or {}).get("upsampling")
            if isinstance(up, int) and 1 <= up <= 64:
                factor = up
        elements = max(elements, header.symbols)
        pixels = max(pixels, header.height * factor * header.width * factor)
    return Estimate(
        elements, pixels, BASE_BYTES + BYTES_PER_PIXEL * pixels, SECONDS_PER_PIXEL * pixels
    )


class Admission:
    """At most ``workers`` decodes run and ``queue`` wait; their memory estimates together
    stay within ``memory_budget``."""

    def __init__(
        self,
        *,
        workers: int,
        queue: int,
        memory_budget: int,
        timeout_s: float,
        max_latent_elements: int,
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

    @property
    def waiting(self) -> int:
        return max(0, self.inflight - self.running)

    def check(self, est: Estimate) -> None:
        """Refuse a decode that no amount of waiting would admit, naming the limit."""
        if est.latent_elements > self.max_latent_elements:
            raise ServiceError(
                f"the latent has {est.latent_elements} elements, over the limit "
                f"max_latent_elements={self.max_latent_elements}",
                code=ErrorCode.LATENT_OVER_LIMIT,
            )
        if est.memory_bytes > self.memory_budget:
            raise ServiceError(
                f"a {est.pixels}-pixel decode needs about {est.memory_bytes >> 20} MiB, over "
                f"the limit memory_budget_bytes={self.memory_budget} "
                f"({self.memory_budget >> 20} MiB)",
                code=ErrorCode.DECODE_MEMORY_OVER_BUDGET,
            )
        if est.seconds > self.timeout_s:
            raise ServiceError(
                f"a {est.pixels}-pixel decode takes about {est.seconds:.1f} s, over the limit "
                f"decode_timeout_s={self.timeout_s:g}",
                code=ErrorCode.DECODE_TIME_OVER_LIMIT,
            )

    def _retry_after(self) -> str:
        return str(max(1, math.ceil(self._mean_s * (self.inflight + 1) / self.workers)))

    def _reserve(self, est: Estimate) -> None:
        with self._lock:
            if self.inflight >= self.capacity:
                raise ServiceError(
                    f"{self.inflight} decodes running or queued (limit workers+queue="
                    f"{self.capacity}); retry later",
                    code=ErrorCode.QUEUE_FULL,
                    headers={"Retry-After": self._retry_after()},
                )
            if self.reserved + est.memory_bytes > self.memory_budget:
                raise ServiceError(
                    f"decodes admitted hold {self.reserved >> 20} MiB of the "
                    f"memory_budget_bytes={self.memory_budget >> 20} MiB; retry later",
                    code=ErrorCode.MEMORY_BUSY,
                    headers={"Retry-After": self._retry_after()},
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
            raise ServiceError(
                f"the decode could not start within decode_timeout_s={self.timeout_s:g} "
                f"({self.waiting} queued); nothing ran, retry later",
                code=ErrorCode.QUEUE_TIMEOUT,
                headers={"Retry-After": self._retry_after()},
            )
        # Running: timeout_s counts from when it started.
        t0 = began.result() if began.done() else time.perf_counter()
        left = max(0.0, self.timeout_s - (time.perf_counter() - t0))
        try:
            return await asyncio.wait_for(asyncio.shield(result), left)
        except TimeoutError:
            raise ServiceError(
                f"the decode ran past decode_timeout_s={self.timeout_s:g}",
                code=ErrorCode.DECODE_TIMEOUT,
            ) from None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
