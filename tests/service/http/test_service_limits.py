"""Limits: a saturated service answers 429 with Retry-After while /healthz still answers; a
decode whose estimate (from the payload header) is over the memory budget or the time limit
is refused with a 413 naming the limit; a decode past its timeout is a 504."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from _svc import SAMPLE_JSON, envelope_of_latent, in_process, serve

from wai_dispatch.codec.envelope import parse_json
from wai_dispatch.dispatch.errors import TooLarge
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.prepare import SECONDS_PER_PIXEL, Estimate, estimate, estimate_of
from wai_dispatch.service.http.admission import Admission, resident_bytes
from wai_dispatch.service.http.errors import ServiceError, headers_of


def test_saturation_is_429_with_retry_after_and_healthz_answers(tmp_path: Path) -> None:
    # end to end on uvicorn: concurrent clients on real sockets fill the workers and the queue
    with serve(tmp_path, decode_threads=1, queue=1) as live:
        body = SAMPLE_JSON.read_bytes()
        headers = {
            "Authorization": f"Bearer {live.tokens['sink']}",
            "Content-Type": "application/json",
        }
        health: list[tuple[int, float, int]] = []
        stop = threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=live.url, timeout=10) as c:
                while not stop.is_set():
                    t = time.perf_counter()
                    status = c.get("/healthz").status_code
                    health.append(
                        (status, time.perf_counter() - t, live.service.admission.inflight)
                    )
                    time.sleep(0.01)

        def post(_: int) -> httpx.Response:
            with httpx.Client(base_url=live.url, timeout=60) as c:
                return c.post("/v1/decode", content=body, headers=headers)

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            with ThreadPoolExecutor(12) as pool:
                answers = list(pool.map(post, range(24)))
        finally:
            stop.set()
            prober.join()
    statuses = [a.status_code for a in answers]
    assert set(statuses) == {200, 429}, statuses
    busy = [a for a in answers if a.status_code == 429]
    assert all(a.json()["error"]["code"] == "queue_full" for a in busy)
    assert all(int(a.headers["retry-after"]) >= 1 for a in busy)
    assert "workers+queue=2" in busy[0].json()["error"]["message"]
    during = [h for h in health if h[2] > 0]  # probes answered while decodes were in flight
    assert during and all(status == 200 for status, _, _ in during)


def test_decode_over_the_memory_budget_names_the_limit(tmp_path: Path) -> None:
    with in_process(tmp_path, memory_budget_bytes=80 * 1024 * 1024) as app, app.client() as c:
        small = envelope_of_latent(tmp_path / "sets", 4, 4)  # 64×64 px: inside the budget
        big = envelope_of_latent(tmp_path / "sets", 16, 16)  # 256×256 px: ~100 MB
        assert c.post("/v1/decode", content=small).status_code == 200
        r = c.post("/v1/decode", content=big)
    assert (r.status_code, r.json()["error"]["code"]) == (413, "decode_memory_over_budget")
    assert "memory_budget_bytes=83886080" in r.json()["error"]["message"]


def _admission(**kw: object) -> Admission:
    args = {
        "workers": 1,
        "queue": 0,
        "memory_budget": 1 << 30,
        "timeout_s": 30.0,
        "max_latent_elements": 1 << 20,
        **kw,
    }
    return Admission(**args)  # type: ignore[arg-type]


def test_estimate_reads_the_header_and_the_sets_upsampling(tmp_path: Path) -> None:
    decoder = Decoder.assemble(tmp_path)
    est = estimate(decoder.prepare(parse_json(envelope_of_latent(tmp_path / "sets", 64, 32))))
    assert (est.latent_elements, est.pixels) == (192 * 64 * 32, 1024 * 512)
    # 64 MiB + the picture's 40 B/pixel + the activations' 520 B/pixel up to one tile (256 MiB)
    assert est.memory_bytes == 64 * 1024 * 1024 + 40 * 1024 * 512 + 256 * 1024 * 1024


def test_time_estimate_over_the_timeout_is_413() -> None:
    adm = _admission(timeout_s=0.05)
    with pytest.raises(TooLarge) as err:
        adm.check(Estimate(192 * 256, 256 * 256, 100 << 20, 0.11))
    assert err.value.code == "decode_time_over_limit"
    assert "decode_timeout_s=0.05" in err.value.message
    adm.close()


def test_memory_taken_by_admitted_decodes_is_429_and_timeout_is_504() -> None:
    adm = _admission(workers=2, queue=2, memory_budget=300 << 20, timeout_s=0.2)
    gate = threading.Event()

    async def scenario() -> tuple[str, str, str]:
        first = asyncio.ensure_future(adm.run(Estimate(1, 1, 200 << 20, 0.0), gate.wait))
        await asyncio.sleep(0.05)
        try:
            await adm.run(Estimate(1, 1, 200 << 20, 0.0), lambda: None)
            busy = "admitted"
        except ServiceError as exc:
            busy = exc.code + " " + headers_of(exc)["Retry-After"]
        try:
            await first
            late = "finished"
        except ServiceError as exc:
            late = exc.code
        held = str(adm.reserved)
        return busy, late, held

    busy, late, held = asyncio.run(scenario())
    assert busy == "memory_busy 1"
    assert late == "decode_timeout"
    assert held == str(200 << 20)  # the timed-out decode still holds its memory until it ends
    gate.set()
    adm.close()
    assert adm.reserved == 0 and adm.inflight == 0


def test_the_timeout_counts_running_time_and_a_queued_decode_is_refused_unrun() -> None:
    """workers=1, timeout 0.5 s: a decode queued 0.35 s behind another that then runs 0.35 s
    finishes (0.7 s in all, 0.35 s running); behind a decode that holds the worker past the
    timeout, a queued one is refused with queue_timeout (503, Retry-After) and never runs."""
    adm = _admission(workers=1, queue=2, timeout_s=0.5)
    ran: list[str] = []

    def job(name: str, seconds: float) -> Callable[[], str]:
        def run() -> str:
            ran.append(name)
            time.sleep(seconds)
            return name

        return run

    waited: list[float] = []

    async def scenario() -> list[str]:
        est = Estimate(1, 1, 1, 0.0)
        a = asyncio.ensure_future(adm.run(est, job("a", 0.35)))
        b = asyncio.ensure_future(adm.run(est, job("b", 0.35)))
        out = [str(x) for x in await asyncio.gather(a, b)]
        slow = asyncio.ensure_future(adm.run(est, job("slow", 1.5)))
        await asyncio.sleep(0.05)
        t = time.perf_counter()
        try:
            await adm.run(est, job("queued", 0.0))
        except ServiceError as exc:
            waited.append(time.perf_counter() - t)
            out.append(f"{exc.code} {headers_of(exc)['Retry-After']}")
        try:
            await slow
        except ServiceError as exc:
            out.append(exc.code)
        return out

    out = asyncio.run(scenario())
    assert out == ["a", "b", "queue_timeout 1", "decode_timeout"]
    assert waited[0] >= 0.45  # it waited its queue timeout (0.5 s) before the refusal
    time.sleep(1.2)
    adm.close()
    assert ran == ["a", "b", "slow"]  # the refused one never ran, so stored no report
    assert adm.inflight == 0 and adm.reserved == 0


def test_memory_the_process_holds_is_429_with_nothing_in_flight() -> None:
    """The budget counts the process's resident growth over its baseline where that is more
    than the estimates in flight (a runtime's arena, a decode that outlived its timeout)."""
    resident: list[int | None] = [100 << 20]
    adm = _admission(memory_budget=300 << 20, resident=lambda: resident[0])
    est = Estimate(1, 1, 100 << 20, 0.0)

    def attempt() -> str:
        try:
            return asyncio.run(adm.run(est, lambda: "decoded"))
        except ServiceError as exc:
            return f"{exc.code} {headers_of(exc)['Retry-After']}"

    assert attempt() == "decoded"
    assert adm.resident_base == 100 << 20  # read when the first decode was admitted
    resident[0] = (100 << 20) + (250 << 20)  # the process holds 250 MiB more than at start
    assert adm.held() == 250 << 20 and adm.inflight == 0 and adm.reserved == 0
    with pytest.raises(ServiceError) as err:
        asyncio.run(adm.run(est, lambda: "decoded"))
    assert err.value.code == "memory_busy" and headers_of(err.value)["Retry-After"] == "1"
    assert "the process hold 250 MiB of the memory_budget_bytes=300 MiB" in err.value.message
    resident[0] = (100 << 20) + (150 << 20)  # given back: 150 + 100 fits
    assert attempt() == "decoded"
    resident[0] = None  # no /proc (macOS): only the estimates in flight count
    assert adm.held() == 0 and attempt() == "decoded"
    adm.close()


def test_resident_bytes_reads_this_process() -> None:
    held = resident_bytes()
    if not Path("/proc/self/statm").exists():  # pragma: no cover - macOS
        assert held is None
        return
    assert held is not None and 10 << 20 < held < 64 << 30


def test_the_time_estimate_calibrates_from_measured_decodes_within_bounds() -> None:
    adm = _admission()
    assert adm.seconds_per_pixel == SECONDS_PER_PIXEL
    adm.measured(64 * 64, 10.0)  # too small to say anything about the per-pixel time
    assert adm.seconds_per_pixel == SECONDS_PER_PIXEL
    adm.measured(1 << 20, 2 * SECONDS_PER_PIXEL * (1 << 20))  # twice as slow as the constant
    assert adm.seconds_per_pixel == pytest.approx(1.2 * SECONDS_PER_PIXEL)
    for _ in range(100):  # one absurd decode after another: held at 8×
        adm.measured(1 << 20, 3600.0)
    assert adm.seconds_per_pixel == pytest.approx(8 * SECONDS_PER_PIXEL)
    for _ in range(100):  # instant: held at 0.25×
        adm.measured(1 << 20, 0.0)
    assert adm.seconds_per_pixel == pytest.approx(0.25 * SECONDS_PER_PIXEL)
    est = estimate_of(0, 1 << 20)
    assert adm.seconds(est) == pytest.approx(0.25 * est.seconds)
    adm.close()


def test_a_decode_is_refused_once_calibration_says_the_machine_is_slow() -> None:
    adm = _admission(timeout_s=0.5)
    est = estimate_of(0, 256 * 256)  # 0.11 s by the constant: admitted
    adm.check(est)
    for _ in range(20):  # this machine decodes at ten times the constant
        adm.measured(512 * 512, 10 * SECONDS_PER_PIXEL * 512 * 512)
    with pytest.raises(TooLarge) as err:
        adm.check(est)  # 8× (the bound): 0.89 s
    assert err.value.code == "decode_time_over_limit"
    assert "takes about 0.9 s on this machine (13.60 µs per pixel, measured)" in err.value.message
    assert "decode_timeout_s=0.5" in err.value.message
    adm.close()


def test_a_served_decode_calibrates_the_estimate(tmp_path: Path) -> None:
    with in_process(tmp_path) as app, app.client() as c:
        body = envelope_of_latent(tmp_path / "sets", 16, 16)  # 256×256 px
        assert c.post("/v1/decode", content=body).status_code == 200
        spp = app.service.admission.seconds_per_pixel
    assert spp != SECONDS_PER_PIXEL
    assert 0.25 * SECONDS_PER_PIXEL <= spp <= 8 * SECONDS_PER_PIXEL
