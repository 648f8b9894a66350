"""The page's WebNN paths in Debian's Chromium (spec §6.2, §8 row 4).

With ``--enable-features=WebMachineLearningNeuralNetwork`` this Chromium exposes
``navigator.ml`` but ``createContext`` fails ("WebNN is not supported on this platform"): every
WebNN path is dispatch_unit_absent with the browser's reason, contexts are asked for npu, gpu,
cpu in that order, and the symbols digest is still the native sink's. ``intent: replicate`` is
refused before any context is created (counted by an init script). Without the feature there is
no navigator.ml at all. Every report the page gives validates, and equals what the Python core
gives for the same facts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pagekit import (
    PAGE_OFFER,
    ROOT,
    WEBNN_ARGS,
    open_page,
    screenshot,
    serve_service,
)

from wai_dispatch.codec.envelope import parse
from wai_dispatch.codec.payload import entropy_stage
from wai_dispatch.codec.sets import SetStore
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.dispatch import REGISTRY, Report, ScriptedAdapter, choose, demand
from wai_dispatch.dispatch.offer import (
    CPU_ONNX_RUNTIME,
    GPU_ONNX_RUNTIME,
)
from wai_dispatch.setfacts.limits import Limits

ENVELOPES = ROOT / "conformance" / "envelopes"
OFFER = PAGE_OFFER  # js/app.js
COUNT_CONTEXTS = """
window.__contexts = [];
if (navigator.ml) {
  const proto = Object.getPrototypeOf(navigator.ml);
  const original = proto.createContext;
  proto.createContext = function (...args) {
    window.__contexts.push(args[0] && args[0].deviceType);
    return original.apply(this, args);
  };
}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with serve_service(tmp_path_factory.mktemp("webnn")) as (url, site, token):
        site.url, site.token = url, token
        yield site


@pytest.fixture
def webnn_page(site: Any, browser: Any) -> Iterator[Any]:
    with browser(WEBNN_ARGS, init_script=COUNT_CONTEXTS, token=site.token) as page:
        open_page(page, site.url)
        yield page


def native(name: str, store: SetStore) -> tuple[str, dict[str, Any]]:
    """The native sink's symbols digest, and the Python core's report for the same facts (no
    WebNN adapter: every WebNN path's unit is absent; no WebGPU adapter; ONNX Runtime Web's
    WebAssembly backend runs)."""
    envelope = parse((ENVELOPES / name).read_bytes())
    part = envelope.parts()[0]
    cap = REGISTRY[part.capability]
    needed = demand(cap, intent=envelope.intent, pins=envelope.dispatch_pins())
    digest = part.set or store.default_for(cap.name).digest
    stage = entropy_stage(part.payload, tables_of(store.open(digest)), limits=Limits())
    return stage.symbols_digest, choose(cap, needed, OFFER, ORT_WEB).report.to_json()


def decode_sample(page: Any, name: str) -> dict[str, Any]:
    page.select_option("#sample", name)
    result: dict[str, Any] = page.evaluate("window.waiPage.decodeSample()")
    assert page.errors == []
    return result


ORT_WEB = {
    GPU_ONNX_RUNTIME: ScriptedAdapter(GPU_ONNX_RUNTIME, unit=False),
    CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME),
}
REQUIRE_WEBNN = os.environ.get("WAI_REQUIRE_WEBNN") == "1"


@pytest.mark.skipif(
    os.environ.get("WAI_REQUIRE_WEBNN") == "1",
    reason="a browser that gives WebNN: test_webnn_evidence holds its run",
)
def test_webnn_present_but_no_context(site: Any, webnn_page: Any) -> None:
    assert webnn_page.evaluate("typeof navigator.ml.createContext") == "function"
    result = decode_sample(webnn_page, "bmshj2018-demo-q3.json")
    symbols_digest, report = native("bmshj2018-demo-q3.json", site.set_store)
    assert result["decoded"] is True  # on ONNX Runtime Web's WebAssembly backend
    assert result["parts"][0]["symbolsDigest"] == symbols_digest
    assert result["reports"] == [report]
    assert report["ran"]["backend"] == "onnx-runtime" and report["ran"]["unit"] == "cpu"
    assert [r["reason"] for r in report["refused"]] == ["dispatch_unit_absent"] * 4
    Report.from_json(result["reports"][0])
    # npu, gpu, cpu in that order (§6.2), each refused with the browser's own reason
    assert webnn_page.evaluate("window.__contexts") == ["npu", "gpu", "cpu"]
    for key, reason in result["reasons"][0].items():
        if "/webnn/" in key:
            assert "WebNN is not supported on this platform" in reason
    text = webnn_page.inner_text("#paths")
    assert text.count("dispatch_unit_absent") == 4  # three WebNN, gpu/onnx-runtime/float
    assert symbols_digest in webnn_page.inner_text("#digests")
    screenshot(webnn_page, "webnn-unit-absent")


def test_replicate_refused_before_any_context(site: Any, webnn_page: Any) -> None:
    result = decode_sample(webnn_page, "bmshj2018-demo-q3-replicate.json")
    symbols_digest, report = native("bmshj2018-demo-q3-replicate.json", site.set_store)
    assert webnn_page.evaluate("window.__contexts") == []
    assert result["reports"] == [report]
    assert report["needed"] == "decode-equivalence"
    assert [r["reason"] for r in report["refused"]] == ["dispatch_tier_refused"] * 5 + [
        "dispatch_arithmetic_mismatch"
    ] * 2
    assert result["parts"][0]["symbolsDigest"] == symbols_digest
    Report.from_json(result["reports"][0])
    screenshot(webnn_page, "webnn-replicate-refused")


def test_no_navigator_ml(site: Any, browser: Any) -> None:
    """Chromium as it ships: no navigator.ml; every WebNN path is absent, the symbols decode."""
    with browser([], init_script=COUNT_CONTEXTS, token=site.token) as page:
        open_page(page, site.url)
        assert page.evaluate("'ml' in navigator") is False
        result = decode_sample(page, "bmshj2018-demo-q3.json")
    symbols_digest, report = native("bmshj2018-demo-q3.json", site.set_store)
    assert result["reports"] == [report]
    assert result["parts"][0]["symbolsDigest"] == symbols_digest
    reasons = result["reasons"][0]
    assert {reasons[str(p)] for p in OFFER[:3]} == {"this browser exposes no navigator.ml (WebNN)"}


def test_dropped_files(site: Any, webnn_page: Any, tmp_path: Path) -> None:
    """An envelope chosen as a file decodes like a sample; a CBOR file or junk is refused with
    its code on the page, not a crash."""
    webnn_page.set_input_files("#file", str(ENVELOPES / "bmshj2018-demo-q3.json"))
    webnn_page.wait_for_function(
        "() => window.waiPage.last && window.waiPage.last.name.endsWith('.json')"
    )
    last = webnn_page.evaluate("window.waiPage.last")
    assert last["parts"][0]["symbolsDigest"] == native("bmshj2018-demo-q3.json", site.set_store)[0]
    for name, data, code in [
        ("sample.cbor", (ENVELOPES / "bmshj2018-demo-q3.cbor").read_bytes(), "envelope_malformed"),
        (
            "junk.json",
            json.dumps({"format": "wai-envelope/2"}).encode(),
            "envelope_format_unsupported",
        ),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        webnn_page.set_input_files("#file", str(path))
        webnn_page.wait_for_function(
            f"() => window.waiPage.last && window.waiPage.last.name === '{name}'"
        )
        assert webnn_page.evaluate("window.waiPage.last.error.code") == code
        assert webnn_page.get_attribute("#status", "data-state") == "error"
        assert code in webnn_page.inner_text("#status")
    assert webnn_page.errors == []


def test_webnn_evidence(site: Any, webnn_page: Any, decoder: Any) -> None:
    """§8's WebNN row: where the browser gives WebNN (``WAI_REQUIRE_WEBNN=1``: it must), a
    WebNN path runs the synthesis (``placement`` null, tier none), the symbols are the native
    sink's and the picture is within §6.4's 40 dB of the native CPU decode. Where it gives
    none (this Chromium on Linux), every WebNN path is absent and the symbols still decode."""
    import numpy as np

    from wai_dispatch.service.decoding.verify import PSNR_BOUND_DB, psnr_rgb8

    name = "bmshj2018-demo-q3.json"
    result = decode_sample(webnn_page, name)
    symbols_digest, _ = native(name, site.set_store)
    assert result["parts"][0]["symbolsDigest"] == symbols_digest
    ran = result["reports"][0]["ran"]
    if ran is None or ran["backend"] != "webnn":
        reasons = result["reasons"][0]
        assert not REQUIRE_WEBNN, f"WAI_REQUIRE_WEBNN=1 and no WebNN path ran: {reasons}"
        refused = {(r["unit"], r["reason"]) for r in result["reports"][0]["refused"]}
        assert {u for u, why in refused if why == "dispatch_unit_absent"} >= {"npu", "gpu", "cpu"}
        return
    assert ran["placement"] is None and ran["tier"] == "none"
    data = webnn_page.evaluate("Array.from(window.waiPage.picture.data)")
    reference = decoder.decode((ENVELOPES / name).read_bytes()).rgb
    picture = np.asarray(data, dtype=np.uint8).reshape(reference.shape)
    assert psnr_rgb8(picture, reference) >= PSNR_BOUND_DB
