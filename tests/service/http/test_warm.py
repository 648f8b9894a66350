"""Warm before ready: ``/readyz`` says ``warming`` until every installed set's program was
built and run once; the first decode after ready then builds nothing (the program cache has no
new miss). How long that first decode takes beside a warm one is ``make bench``'s
(``tools/bench_warm.py``), not a timed test's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _svc import in_process

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.dispatch import parse_offer
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.warm import Warmup

SAMPLES = ["bmshj2018-demo-q3.json", "int-synth-int8-units-demo-q3.json"]


def test_the_first_decode_after_ready_builds_nothing(tmp_path: Path) -> None:
    with in_process(tmp_path / "data", warm=True) as live, live.client(None) as c:
        deadline = time.monotonic() + 120
        while (ready := c.get("/readyz")).status_code != 200:
            assert ready.json()["programs"] == "warming", ready.text
            assert time.monotonic() < deadline, "never warm"
            time.sleep(0.1)
        body = ready.json()
        assert body["programs"] == "warm"
        installed = {s.digest for s in live.service.decoder.set_store.list()}
        assert {w["set"] for w in body["warmed"]} == installed
        assert all(w["path"] and "error" not in w for w in body["warmed"]), body["warmed"]
        programs = live.service.decoder.programs
        misses = programs.misses
        with live.client() as sink:
            for name in SAMPLES:
                r = sink.post(
                    "/v1/decode",
                    content=(envelopes_dir() / name).read_bytes(),
                    headers={"Content-Type": "application/json"},
                )
                assert r.status_code == 200, r.text
        assert programs.misses == misses  # every program the decodes ran was built already


def test_warming_off_is_ready_at_once(tmp_path: Path) -> None:
    with in_process(tmp_path / "data", warm=False) as live, live.client(None) as c:
        body = c.get("/readyz").json()
        assert body["programs"] == "warm" and body["warmed"] == []


def test_a_set_no_path_runs_is_recorded_and_the_rest_warm(tmp_path: Path) -> None:
    """With only the neural processor path offered (Core ML, absent here), no set decodes:
    each is recorded with its code and the warmup still ends (a replica is not kept unready by
    a set it cannot run)."""
    decoder = Decoder.assemble(tmp_path / "data", parse_offer(["npu/model-runtime/float"]))
    warmup = Warmup(decoder)
    assert warmup.state() == "warming" and not warmup.done.is_set()
    results = warmup.run()
    assert warmup.state() == "warm"
    assert {w.digest for w in results} == {s.digest for s in decoder.set_store.list()}
    assert all(w.path is None and w.error == "decode_no_path" for w in results), results


@pytest.mark.parametrize("name", SAMPLES)
def test_warming_decodes_on_the_path_a_request_takes(tmp_path: Path, name: str) -> None:
    decoder = Decoder.assemble(tmp_path / "data")
    warmed = {w.digest: w for w in Warmup(decoder).run()}
    result = decoder.decode((envelopes_dir() / name).read_bytes())
    ran = result.reports[-1].ran
    assert ran is not None
    assert warmed[result.part.set_digest].path == str(ran.path)
