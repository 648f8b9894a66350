"""The page's entropy stage of a hyperprior set (service/web/page_files/js/codec/hyperprior.js,
js/codec/waiops.js) in Debian's Chromium: the bundled sample and corpus payloads (one with
escapes in z and y) decode to the pinned symbols digests (z's symbols then y's); the synthesis is
then dispatched as the Python core dispatches it (this Chromium has no WebNN: every WebNN path's
unit is absent, the integer WebGPU path is no path for a float capability); broken payloads
(header, z's and y's streams, y's channels) are refused with the code the native entropy stage
gives. One page load."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pagekit import PAGE_OFFER, ROOT, open_page, serve_service

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.envelope import parse
from wai_dispatch.dispatch import REGISTRY, Report, ScriptedAdapter, choose, demand
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.dispatch.offer import (
    CPU_ONNX_RUNTIME,
    GPU_ONNX_RUNTIME,
)
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.hyperprior_encode import open_folder

ENVELOPES = ROOT / "conformance" / "envelopes"
SET = ROOT / "conformance" / "sets" / "bmshj2018-hyperprior-int8-units-demo-q3"
CORPUS = ROOT / "conformance" / "neural-conformance" / "bmshj2018-hyperprior"
SAMPLE = "bmshj2018-hyperprior-int8-units-demo-q3.json"
SAMPLE_DIGEST = "90830c3f5aa82cf41a6d9d47f770344a219136618f22ece725c1ab7d6aa7b6df"
OFFER = PAGE_OFFER  # js/app.js
#: the small corpus payloads: 1×1 side latent; and 2×3 with escapes in z's and y's streams
NAMES = ("chelsea-64x64", "extreme-2x3")


def envelope(payload: bytes, set_digest: str) -> str:
    return json.dumps(
        {
            "format": "wai-envelope/1",
            "capability": "wai.neural.bmshj2018_hyperprior",
            "payload": base64.b64encode(payload).decode(),
            "set": set_digest,
        }
    )


def native_code(stage: HyperStage, payload: bytes) -> str:
    """The code the native entropy stage (service/decoding/hyperprior.py) refuses it with."""
    with pytest.raises(WaiError) as refused:
        stage.run(payload, limits=Limits())
    return str(refused.value.code)


def flipped(payload: bytes, at: int) -> bytes:
    out = bytearray(payload)
    out[at] ^= 0x5A
    return bytes(out)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[dict[str, Any]]:
    """Every decode of this module in one page: the sample (chosen on the page), the corpus
    payloads and the broken ones (as dropped files), keyed by name."""
    corpus = json.loads((CORPUS / "corpus.json").read_text(encoding="utf-8"))
    entries = {p["name"]: p for p in corpus["payloads"]}
    good = (CORPUS / "extreme-2x3.waih").read_bytes()
    payloads = {n: (CORPUS / entries[n]["payload"]).read_bytes() for n in NAMES}
    files = {n: envelope(b, corpus["set"]) for n, b in payloads.items()}
    head = waih.read_header(good)
    small = payloads["chelsea-64x64"]
    broken = {
        "truncated": good[:-1],
        "trailing": good + b"\0",
        "magic": b"WAIX" + good[4:],
        "z stream": flipped(good, waih.HEADER_SIZE + 34),
        "y stream": flipped(good, waih.HEADER_SIZE + head.z_bytes + 40),
        # the hyper-synthesis gives 192 channels, the header says 64
        "y channels": small[:6] + b"\x40\x00" + small[8:],
    }
    files |= {n: envelope(b, corpus["set"]) for n, b in broken.items()}
    with (
        serve_service(tmp_path_factory.mktemp("hyperprior")) as (url, _, token),
        browser([], token=token) as page,
    ):
        open_page(page, url)
        page.select_option("#sample", SAMPLE)
        out = {SAMPLE: page.evaluate("window.waiPage.decodeSample()")}
        out["digests"] = page.inner_text("#digests")
        out |= page.evaluate(
            """async (files) => {
                const out = {};
                for (const [name, text] of Object.entries(files)) {
                    const bytes = new TextEncoder().encode(text);
                    out[name] = await window.waiPage.decodeBytes(bytes, name);
                }
                return out;
            }""",
            files,
        )
        out["errors"] = page.errors
        out["pinned"] = {n: entries[n]["symbols_digest"] for n in NAMES}
        stage = HyperStage.of(open_folder(SET))
        assert stage is not None
        out["broken"] = {n: native_code(stage, b) for n, b in broken.items()}
        yield out


def test_sample_symbols_digest(results: dict[str, Any]) -> None:
    assert results["errors"] == []
    got = results[SAMPLE]
    assert got["parts"][0]["symbolsDigest"] == SAMPLE_DIGEST
    assert got["parts"][0]["shape"] == [1, 192, 16, 16]  # y's shape
    assert SAMPLE_DIGEST in results["digests"]  # shown on the page


@pytest.mark.parametrize("name", NAMES)
def test_corpus_symbols_digest(results: dict[str, Any], name: str) -> None:
    got = results[name]
    assert got["parts"][0]["symbolsDigest"] == results["pinned"][name]


def test_synthesis_dispatched_as_the_core_does(results: dict[str, Any]) -> None:
    """No WebNN in this Chromium: each WebNN path refused as Python's choose refuses it, then
    ONNX Runtime Web's WebAssembly backend gives the picture (tests/page/test_page_onnx.py
    holds it to the native decode)."""
    sample = parse((ENVELOPES / SAMPLE).read_bytes())
    cap = REGISTRY[sample.parts()[0].capability]
    needed = demand(cap, intent=sample.intent, pins=sample.dispatch_pins())
    ort_web = {
        GPU_ONNX_RUNTIME: ScriptedAdapter(GPU_ONNX_RUNTIME, unit=False),
        CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME),
    }
    want = choose(cap, needed, OFFER, ort_web).report.to_json()
    got = results[SAMPLE]
    assert got["decoded"] is True and got["picture"] is not None
    assert got["reports"] == [want]
    assert [r["reason"] for r in want["refused"]] == ["dispatch_unit_absent"] * 4
    Report.from_json(got["reports"][0])


@pytest.mark.parametrize(
    "name", ["truncated", "trailing", "magic", "z stream", "y stream", "y channels"]
)
def test_broken_payload_same_code_as_native(results: dict[str, Any], name: str) -> None:
    assert results[name]["error"]["code"] == results["broken"][name]
