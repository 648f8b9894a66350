"""A replica's admission as a queue, simulated as ``service/http/admission.py`` admits: Poisson
arrivals, ``servers`` workers first come first served, at most ``queue`` waiting (one more is
refused: ``queue_full``), and a request that cannot start within ``timeout_s`` refused
(``queue_timeout``). Service times are drawn from measured ones or an exponential (to check
against Erlang C). Seeded Mersenne Twister and floats only: the same figures on any machine."""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SimResult:
    """Latency (wait plus service) of the requests served, in seconds, and what was refused."""

    served: int
    refused_full: int
    refused_timeout: int
    mean_wait_s: float
    p50_s: float
    p99_s: float
    utilisation: float

    @property
    def refused(self) -> float:
        total = self.served + self.refused_full + self.refused_timeout
        return (self.refused_full + self.refused_timeout) / total if total else 0.0


def simulate(
    rate: float,
    servers: int,
    service: Sequence[float] | float,
    *,
    queue: int = 8,
    timeout_s: float = 30.0,
    n: int = 100_000,
    seed: int = 1,
) -> SimResult:
    """``n`` arrivals at ``rate`` per second; ``service`` the measured service times (drawn
    with replacement) or, as a float, the mean of an exponential."""
    if rate <= 0 or servers < 1 or n < 1:
        raise ValueError("rate > 0, servers >= 1, n >= 1")
    rng = random.Random(seed)
    if isinstance(service, float | int):
        mean = float(service)

        def draw() -> float:
            return rng.expovariate(1.0 / mean)
    else:
        times = list(service)

        def draw() -> float:
            return times[rng.randrange(len(times))]

    free = [0.0] * servers  # when each worker is next free (a heap)
    waiting: list[float] = []  # start times of admitted requests not yet started (a heap)
    t = 0.0
    latencies: list[float] = []
    waits = 0.0
    busy = 0.0
    full = late = 0
    for _ in range(n):
        t += rng.expovariate(rate)
        while waiting and waiting[0] <= t:
            heapq.heappop(waiting)
        start = max(t, free[0])
        if start > t and len(waiting) >= queue:
            full += 1
            continue
        if start - t > timeout_s:
            late += 1
            continue
        s = draw()
        heapq.heapreplace(free, start + s)
        if start > t:
            heapq.heappush(waiting, start)
        waits += start - t
        busy += s
        latencies.append(start - t + s)
    latencies.sort()
    served = len(latencies)
    horizon = max(t, max(free))
    return SimResult(
        served=served,
        refused_full=full,
        refused_timeout=late,
        mean_wait_s=waits / served if served else 0.0,
        p50_s=_quantile(latencies, 0.50),
        p99_s=_quantile(latencies, 0.99),
        utilisation=busy / (servers * horizon) if horizon else 0.0,
    )


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def erlang_c(servers: int, offered: float) -> float:
    """The probability that an arrival waits in an M/M/c queue with no limit, ``offered`` the
    load in erlangs (arrival rate × mean service time); needs ``offered < servers``."""
    if not 0 <= offered < servers:
        raise ValueError("0 <= offered load < servers")
    term = 1.0
    total = 1.0
    for k in range(1, servers):
        term *= offered / k
        total += term
    last = term * offered / servers * servers / (servers - offered)
    return last / (total + last)


def mm_c_mean_wait(servers: int, rate: float, mean_service: float) -> float:
    """Erlang C's mean wait in an M/M/c queue (no limit)."""
    offered = rate * mean_service
    return erlang_c(servers, offered) * mean_service / (servers - offered)
