"""The page's ``cpu/wai-ops/integer`` in Debian's Chromium without a GPU (issue 39 item 1): the
integer program as the native ``float32`` engine's graph on ONNX Runtime Web's WebAssembly
build. Every corpus payload decodes to its pinned RGB8 hash and to the native decode's picture,
bit for bit; the int-synth sample decodes on the main page at ``decode-equivalence`` with every
operation placed on the CPU, the Python core's report for the same facts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pagekit import PAGE_OFFER, ROOT, open_page, screenshot, serve_service

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.dispatch import REGISTRY, Report, ScriptedAdapter, choose, demand
from wai_dispatch.dispatch.offer import CPU_WAI_OPS, GPU_WGSL
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.paths.waiops.adapter import load_set_program
from wai_dispatch.paths.waiops.onnx_engine import OnnxEngine
from wai_dispatch.service.decoding.results import rgb_digest
from wai_dispatch.tools.neural_conformance import program_rgb8

CORPUS_DIR = ROOT / "conformance" / "neural-conformance"
CORPUS = json.loads((CORPUS_DIR / "corpus.json").read_text(encoding="utf-8"))
ENVELOPES = ROOT / "conformance" / "envelopes"
RUNTIME = "/vendor/onnxruntime_web/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with serve_service(tmp_path_factory.mktemp("waiops-wasm")) as (url, site, token):
        site.url, site.token = url, token
        yield site


def native_decodes(site: Any) -> dict[str, tuple[str, float]]:
    """Each corpus payload decoded natively (entropy stage, the float32 engine, RGB8), warm:
    its picture's BLAKE3 and the seconds of the second run."""
    from wai_dispatch.codec.tables import EntropyTables

    files = site.open(CORPUS["set"])
    engine = OnnxEngine(load_set_program(files))
    tables = EntropyTables.from_json(files.read(str(files.manifest.facts.tables)))
    out = {}
    for entry in CORPUS["payloads"]:
        data = (CORPUS_DIR / entry["payload"]).read_bytes()
        for _ in range(2):
            start = time.perf_counter()
            rgb = program_rgb8(engine.run(codec_payload.decode(data, tables)))
            took = time.perf_counter() - start
        out[entry["name"]] = (rgb_digest(rgb), took)
    return out


@pytest.mark.slow
def test_corpus_on_webassembly(site: Any, browser: Any) -> None:
    with browser([], token=site.token) as page:
        page.goto(f"{site.url}verify-int.html?path=cpu/wai-ops/integer")
        done = "() => window.waiVerifyInt && window.waiVerifyInt.done"
        page.wait_for_function(done, timeout=600_000)
        summary: dict[str, Any] = page.evaluate("window.waiVerifyInt")
        assert page.errors == []
        assert page.evaluate("navigator.gpu ? navigator.gpu.requestAdapter() : null") is None
        screenshot(page, "waiops-wasm-verify-corpus")
    assert summary["path"] == "cpu/wai-ops/integer", summary
    native = native_decodes(site)
    rows = {row["name"]: row for row in summary["rows"]}
    assert sorted(rows) == sorted(p["name"] for p in CORPUS["payloads"])
    for entry in CORPUS["payloads"]:
        row = rows[entry["name"]]
        assert row["symbols"] == entry["symbols_digest"], row
        assert row["got"] == entry["rgb8_blake3"] == native[entry["name"]][0], row
        print(
            f"{entry['name']}: page {row['ms'] / 1000:.2f} s (cpu/wai-ops/integer, WebAssembly),"
            f" native {native[entry['name']][1]:.2f} s (float32 engine)"
        )
    assert summary["verdict"] == "pass"


def test_int_synth_sample_on_webassembly(site: Any, browser: Any) -> None:
    """No adapter: gpu/wgsl/integer is dispatch_unit_absent, and cpu/wai-ops/integer runs the
    sample at decode-equivalence, the native decode's picture exactly."""
    name = "int-synth-int8-units-demo-q3.json"
    with browser([], token=site.token) as page:
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        open_page(page, site.url)
        offer = page.evaluate(
            "import('./js/app.js').then((m) => m.OFFER.map((p) => "
            "`${p.unit}/${p.backend}/${p.arithmetic}`))"
        )
        assert offer == [str(p) for p in PAGE_OFFER]
        environment = page.inner_text("#environment")
        assert "gives no adapter" in environment or "no navigator.gpu" in environment
        assert "for the integer kernels" not in environment
        page.select_option("#sample", name)
        result: dict[str, Any] = page.evaluate("window.waiPage.decodeSample()")
        assert page.errors == [], page.errors
        paths = page.inner_text("#paths")
        screenshot(page, "waiops-wasm-int-synth")
    report = result["reports"][0]
    Report.from_json(report)
    cap = REGISTRY["wai.neural.int_synth"]
    adapters = {
        GPU_WGSL: ScriptedAdapter(GPU_WGSL, unit=False),
        CPU_WAI_OPS: ScriptedAdapter(CPU_WAI_OPS, placement=Placement(cpu=12)),
    }
    assert report == choose(cap, demand(cap), PAGE_OFFER, adapters).report.to_json()
    assert report["ran"] == {
        "unit": "cpu",
        "backend": "wai-ops",
        "arithmetic": "integer",
        "tier": "decode-equivalence",
        "placement": {"npu": 0, "gpu": 0, "cpu": 12, "unknown": 0},
    }
    assert "adapter" in result["reasons"][0][str(GPU_WGSL)]
    assert "WebAssembly" in paths
    native = site.decoder.decode((ENVELOPES / name).read_bytes())
    assert str(native.reports[-1].ran.path) == str(CPU_WAI_OPS)
    assert result["parts"][0]["symbolsDigest"] == native.part.symbols_digest
    assert result["picture"]["blake3"] == rgb_digest(native.rgb)
    # the WebAssembly build and the graph fetched once each; the WebGPU build never
    assert sum(u.endswith("ort-wasm-simd-threaded.wasm") for u in requested) == 1
    assert sum(u.endswith("/waiops/float32.onnx") for u in requested) == 1
    assert not [u for u in requested if "ort.webgpu" in u or "asyncify" in u]


def _decode_refused(page: Any) -> tuple[str, str]:
    """The int-synth sample decoded: cpu/wai-ops/integer's refusal and reason (no picture)."""
    page.select_option("#sample", "int-synth-int8-units-demo-q3.json")
    result: dict[str, Any] = page.evaluate("window.waiPage.decodeSample()")
    assert result["decoded"] is False and result["picture"] is None, result
    (refusal,) = [r for r in result["reports"][0]["refused"] if r["backend"] == "wai-ops"]
    return refusal["reason"], result["reasons"][0][str(CPU_WAI_OPS)]


def test_the_path_refuses_what_it_cannot_run_exactly(site: Any, browser: Any) -> None:
    """The service's answers replaced in the browser: a square root that is not correctly
    rounded (the check's graph rounding up) leaves no exact engine, dispatch_unit_absent; a set
    without a float32-exact graph is dispatch_program_absent; a symbol outside the program's
    declared range (the range narrowed) is refused before the graph runs,
    dispatch_backend_failed."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Sqrt", ["n"], ["s"]), helper.make_node("Ceil", ["s"], ["r"])]
    vector = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [None]) for v in "nr"]
    model = helper.make_model(
        helper.make_graph(nodes, "ceil", vector[:1], vector[1:]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    ceil = model.SerializeToString()
    with browser([], token=site.token) as page:
        page.route("**/waiops/isqrt-check", lambda r: r.fulfill(body=ceil))
        open_page(page, site.url)
        code, reason = _decode_refused(page)
        assert code == "dispatch_unit_absent"
        assert "not correctly rounded" in reason
    files = site.open(CORPUS["set"])
    program = json.loads(files.read("synthesis.wai-ops.json"))
    program["input"]["range"] = [0, 0]
    missing = {"error": {"code": "page_not_found", "message": "it has no float32-exact graph"}}
    with browser([], token=site.token) as page:
        page.route("**/files/synthesis.wai-ops.json", lambda r: r.fulfill(json=program, status=200))
        page.route("**/waiops/float32.onnx", lambda r: r.fulfill(json=missing, status=404))
        open_page(page, site.url)
        code, reason = _decode_refused(page)
        assert code == "dispatch_program_absent"
        assert "no float32-exact graph" in reason
        page.unroute("**/waiops/float32.onnx")
        code, reason = _decode_refused(page)
        assert code == "dispatch_backend_failed"
        assert "waiops_input_out_of_range" in reason
        assert page.errors == []
