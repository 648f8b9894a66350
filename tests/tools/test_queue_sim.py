"""The admission simulation against what queueing theory knows exactly (Erlang C for M/M/c),
and its refusals where the queue is bounded."""

from __future__ import annotations

import math

import pytest

from wai_dispatch.tools.queue_sim import erlang_c, mm_c_mean_wait, simulate


def test_erlang_c_known_values() -> None:
    assert math.isclose(erlang_c(1, 0.5), 0.5)  # M/M/1: an arrival waits with probability ρ
    assert math.isclose(erlang_c(2, 1.0), 1 / 3)  # two servers at half load
    with pytest.raises(ValueError):
        erlang_c(2, 2.0)


@pytest.mark.parametrize(("servers", "rho"), [(1, 0.8), (4, 0.8), (8, 0.8)])
def test_the_simulated_wait_is_erlang_cs(servers: int, rho: float) -> None:
    mean = 0.05
    rate = rho * servers / mean
    got = simulate(rate, servers, mean, queue=10**9, timeout_s=1e9, n=200_000, seed=7)
    want = mm_c_mean_wait(servers, rate, mean)
    assert got.refused == 0
    assert got.mean_wait_s == pytest.approx(want, rel=0.08)
    assert got.utilisation == pytest.approx(rho, rel=0.03)


def test_a_bounded_queue_refuses_and_bounds_the_wait() -> None:
    """Over capacity (ρ = 1.5) with 2 workers and 8 waiting: many refusals, and no served
    request waited longer than 8 services' worth could take."""
    service = [0.1] * 10
    got = simulate(30.0, 2, service, queue=8, timeout_s=30.0, n=20_000, seed=3)
    assert got.refused_full > 0.2 * 20_000
    assert got.p99_s <= 0.1 * (8 / 2 + 1) + 1e-9


def test_the_timeout_refuses_what_cannot_start_in_time() -> None:
    got = simulate(30.0, 2, [0.1], queue=10**9, timeout_s=0.25, n=5_000, seed=3)
    assert got.refused_timeout > 0 and got.refused_full == 0
    assert got.p99_s <= 0.25 + 0.1 + 1e-9


def test_the_same_inputs_give_the_same_figures() -> None:
    a = simulate(10.0, 2, [0.05, 0.2, 0.1], n=10_000, seed=5)
    b = simulate(10.0, 2, [0.05, 0.2, 0.1], n=10_000, seed=5)
    assert a == b
