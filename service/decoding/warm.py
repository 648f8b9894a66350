"""Warming: before a service says it is ready, each installed set's program is built and one
small decode runs through it, so the first request pays for no session build, no graph rewrite
and no first-run allocation (a cold first decode took 28× a warm one).

Each set is decoded from a payload made here: a zero latent of :data:`SIDE` × :data:`SIDE`
(a 64 × 64 picture for a 16× synthesis), entropy-coded with the set's own tables, decoded on
the offer's first path that runs it, as a request's would be. A set that does not decode here
(no path, damaged, no tables) is recorded with its error code and does not stop the others.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from wai_dispatch.codec import payload
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.hyperprior import HyperStage

log = logging.getLogger("wai_dispatch.warm")

#: The latent's height and width in a warming decode.
SIDE = 4
#: Sets warmed at once.
WARMERS = 4


@dataclass(frozen=True)
class Warmed:
    """One set warmed: the path that ran (``None`` when none did, with the error's code)."""

    digest: str
    capability: str
    path: str | None
    ms: float
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "set": self.digest,
            "capability": self.capability,
            "path": self.path,
            "ms": round(self.ms, 1),
            **({"error": self.error} if self.error else {}),
        }


class Warmup:
    """Warms a decoder's installed sets, in a thread of its own (:meth:`start`) or in the
    caller's (:meth:`run`); :attr:`done` is set when every set was tried."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.done = threading.Event()
        self.results: list[Warmed] = []
        #: How long warming took, every set (0 until done; skipped: 0).
        self.took_s = 0.0

    def start(self) -> Warmup:
        threading.Thread(target=self.run, name="warmup", daemon=True).start()
        return self

    def skip(self) -> Warmup:
        """Not warming (``WAI_WARM=false``): ready at once, the first decode pays."""
        self.done.set()
        return self

    def run(self) -> list[Warmed]:
        """Warm every installed set, up to :data:`WARMERS` at once (a replica starting with
        several sets is ready after the slowest, not after their sum: a program's build and
        its first run release the GIL); :attr:`took_s`, the whole, when done."""
        t0 = time.perf_counter()
        try:
            items = self.decoder.set_store.list()
            if items:
                with ThreadPoolExecutor(min(WARMERS, len(items)), "wai-warm") as pool:
                    warmed = pool.map(lambda i: self._one(i.digest, i.capability), items)
                    self.results.extend(warmed)
        finally:
            self.took_s = time.perf_counter() - t0
            self.done.set()
        return self.results

    def _one(self, digest: str, capability: str) -> Warmed:
        t0 = time.perf_counter()
        try:
            files = self.decoder.opened.loaded(digest)
            hyper = HyperStage.of(files)
            if hyper is not None:  # a hyperprior set: z of SIDE/4, so y is SIDE × SIDE
                body = hyper.zeros_payload(max(1, SIDE // 4), self.decoder.waiops_engine)
            else:
                tables = tables_of(files)
                zeros = np.zeros((1, tables.channels, SIDE, SIDE), dtype=np.int32)
                body = payload.encode(zeros, tables)
            result = self.decoder.decode_payload(body, capability=capability, set_digest=digest)
        except WaiError as exc:
            ms = (time.perf_counter() - t0) * 1000
            log.warning("warming set %s: %s", digest[:16], exc.code, extra={"set": digest})
            return Warmed(digest, capability, None, ms, str(exc.code))
        ms = (time.perf_counter() - t0) * 1000
        ran = result.reports[-1].ran
        path = str(ran.path) if ran is not None else None
        log.info("warmed", extra={"set": digest, "path": path, "ms": round(ms, 1)})
        return Warmed(digest, capability, path, ms)

    def state(self) -> str:
        return "warm" if self.done.is_set() else "warming"
