"""The decode use case below HTTP (service/usecase/decode.py): an envelope's bytes in, a typed
outcome out (decoded, no path; a typed error raises as it is), its reports handed to the
recorder in one call; the service's path (a gate admits it) and the CLI's (``decode_here``)
give the same."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.decoding.prepare import Estimate
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.usecase import decode as usecase
from wai_dispatch.service.usecase.decode import (
    DecodeDone,
    DecodeRequest,
    NoPathFound,
    decode_here,
)

T = TypeVar("T")
SAMPLE = envelopes_dir() / "bmshj2018-demo-q3.json"
REPLICATE = envelopes_dir() / "bmshj2018-demo-q3-replicate.json"


class Calls:
    """A recorder, a gate and a meter that note what they are told."""

    def __init__(self, refuse: Exception | None = None) -> None:
        self.recorded: list[list[ReportRecord]] = []
        self.admitted: list[Estimate] = []
        self.measured: list[tuple[int, float]] = []
        self.done: list[Any] = []
        self.refuse = refuse

    def begin(self, records: list[ReportRecord]) -> Callable[[], list[ReportRecord]]:
        self.recorded.append(records)
        return lambda: records

    async def run(self, est: Estimate, fn: Callable[[], T]) -> T:
        if self.refuse is not None:
            raise self.refuse
        self.admitted.append(est)
        return await asyncio.to_thread(fn)

    def measured_(self, pixels: int, took: float) -> None:
        self.measured.append((pixels, took))

    def decode_done(self, outcome: Any, seconds: float) -> None:
        self.done.append(outcome)


def _served(decoder: Any, request: DecodeRequest, calls: Calls) -> Any:
    gate = type("Gate", (), {"run": calls.run, "measured": calls.measured_})()
    return asyncio.run(usecase.decode(decoder, request, gate=gate, recorder=calls, meter=calls))


def test_a_decode_is_recorded_once_and_answered_as_asked(decoder: Any) -> None:
    calls = Calls()
    asked = DecodeRequest(SAMPLE.read_bytes(), "json", "sink-a", "rid-1", "rgb")
    outcome = _served(decoder, asked, calls)
    assert isinstance(outcome, DecodeDone)
    assert calls.recorded == [outcome.records] and calls.done == [outcome]
    assert [r.sink for r in outcome.records] == ["sink-a"]
    assert outcome.records[-1].request_id == "rid-1" and outcome.records[-1].path_ran
    assert outcome.picture == outcome.result.rgb.tobytes()
    assert outcome.reports == [r.report for r in outcome.records]
    assert calls.measured == [(calls.admitted[0].pixels, outcome.decode_seconds)]
    here = decode_here(decoder, usecase.local_request(SAMPLE.read_bytes()))
    assert isinstance(here, DecodeDone) and here.result.rgb_digest == outcome.result.rgb_digest
    assert here.picture[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_path_is_an_outcome_with_its_reports_recorded(decoder: Any) -> None:
    calls = Calls()
    outcome = _served(decoder, DecodeRequest(REPLICATE.read_bytes(), None, "s", "r"), calls)
    assert isinstance(outcome, NoPathFound) and outcome.code == "decode_no_path"
    assert calls.recorded == [outcome.records] and outcome.records
    assert all(r.outcome == "refused" for r in outcome.records)
    assert calls.measured == []  # only a decode that ran calibrates the time estimate


@pytest.mark.parametrize(
    ("body", "kind", "code"),
    [(b"{", "json", "envelope_malformed"), (b"\xa0", "cbor", "envelope_invalid")],
)
def test_bad_input_raises_its_typed_error(decoder: Any, body: bytes, kind: Any, code: str) -> None:
    calls = Calls()
    with pytest.raises(WaiError) as raised:
        _served(decoder, DecodeRequest(body, kind, "s", "r"), calls)
    assert raised.value.code == code
    assert calls.recorded == [] and calls.admitted == [] and calls.done == []


def test_the_gates_refusal_raises_as_it_is(decoder: Any) -> None:
    from wai_dispatch.service.http.errors import QueueFull

    full = QueueFull("full", retry_after_s=2)
    calls = Calls(refuse=full)
    with pytest.raises(QueueFull) as raised:
        _served(decoder, DecodeRequest(SAMPLE.read_bytes(), "json", "s", "r"), calls)
    assert raised.value is full and raised.value.retry_after_s == 2
    assert calls.recorded == []


def test_the_limits_check_refuses_before_the_decode(decoder: Any) -> None:
    from wai_dispatch.service.decoding.prepare import check_estimate

    calls = Calls()

    def check(est: Estimate) -> None:
        check_estimate(
            est, max_latent_elements=1, memory_budget_bytes=1 << 40, decode_timeout_s=1e9
        )

    with pytest.raises(WaiError, match="latent") as raised:
        decode_here(
            decoder, usecase.local_request(SAMPLE.read_bytes()), check=check, recorder=calls
        )
    assert raised.value.code == "latent_over_limit"
    assert calls.recorded == []
