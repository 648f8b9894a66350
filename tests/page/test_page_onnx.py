"""The page's ONNX Runtime Web paths in Debian's Chromium (issue 31 item 1): every float bundled
sample decodes to a picture on ``cpu/onnx-runtime/float`` (ONNX Runtime Web's WebAssembly
backend, vendored) within §6.4's 40 dB of the native CPU decode, with the native symbols digest.
``gpu/onnx-runtime/float`` is refused honestly: with no adapter ``dispatch_unit_absent``; on
SwiftShader (a software adapter) ``dispatch_not_placed``; then the WebAssembly path runs, and the
WebGPU build is never fetched (tests/page/test_page_onnx_webgpu.py runs it). A decode
that needs ``decode-equivalence`` (replicate, the integer capability) never asks the float paths.
Each report equals the Python core's for the same facts."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pagekit import PAGE_OFFER, ROOT, open_page, screenshot, serve_service

from wai_dispatch.dispatch import REGISTRY, Report, ScriptedAdapter, choose, demand
from wai_dispatch.dispatch.offer import (
    CPU_ONNX_RUNTIME,
    GPU_ONNX_RUNTIME,
)
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.tools.bench_page import SWIFTSHADER

ENVELOPES = ROOT / "conformance" / "envelopes"
FLOAT_SAMPLES = ["bmshj2018-demo-q3.json", "bmshj2018-hyperprior-int8-units-demo-q3.json"]
OFFER = PAGE_OFFER  # js/app.js
RUNTIME = "/vendor/onnxruntime_web/"
WEBGPU_BUILD = "ort.webgpu.min.mjs"
pytestmark = pytest.mark.slow  # decodes in the browser on ONNX Runtime Web


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with serve_service(tmp_path_factory.mktemp("onnx")) as (url, site, token):
        site.url, site.token = url, token
        yield site


def decode(page: Any, name: str) -> tuple[dict[str, Any], np.ndarray | None, float]:
    page.select_option("#sample", name)
    start = time.perf_counter()
    result: dict[str, Any] = page.evaluate("window.waiPage.decodeSample()")
    took = time.perf_counter() - start
    assert page.errors == []
    pixels = page.evaluate("window.waiPage.picture && Array.from(window.waiPage.picture.data)")
    return result, None if pixels is None else np.array(pixels, np.uint8), took


def python_report(name: str, adapters: dict[Any, Any]) -> dict[str, Any]:
    """The Python core's report for the facts the page met (WebNN absent)."""
    from wai_dispatch.codec.envelope import parse

    envelope = parse((ENVELOPES / name).read_bytes())
    cap = REGISTRY[envelope.parts()[0].capability]
    needed = demand(cap, intent=envelope.intent, pins=envelope.dispatch_pins())
    return choose(cap, needed, OFFER, adapters).report.to_json()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


@pytest.mark.parametrize("gpu", ["no-adapter", "swiftshader"])
def test_float_samples_decode_on_wasm(site: Any, browser: Any, gpu: str) -> None:
    with browser(SWIFTSHADER if gpu == "swiftshader" else [], token=site.token) as page:
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        open_page(page, site.url)
        assert not [u for u in requested if RUNTIME in u]  # lazily: not on the page's load
        for name in FLOAT_SAMPLES:
            result, pixels, took = decode(page, name)
            start = time.perf_counter()
            native = site.decoder.decode((ENVELOPES / name).read_bytes())
            native_took = time.perf_counter() - start
            assert str(native.reports[-1].ran.path) == "cpu/onnx-runtime/float"
            assert result["decoded"] is True, result
            report = result["reports"][0]
            Report.from_json(report)
            assert report["ran"] == {
                "unit": "cpu",
                "backend": "onnx-runtime",
                "arithmetic": "float",
                "tier": native.reports[-1].ran.tier.value,
                "placement": None,  # ONNX Runtime Web states none
            }
            gpu_adapter = (
                ScriptedAdapter(GPU_ONNX_RUNTIME, unit=False)
                if gpu == "no-adapter"
                else ScriptedAdapter(GPU_ONNX_RUNTIME, placement=Placement(cpu=16))
            )
            want = python_report(
                name,
                {
                    GPU_ONNX_RUNTIME: gpu_adapter,
                    CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME),
                },
            )
            assert report == want
            reasons = result["reasons"][0]
            if gpu == "swiftshader":
                assert "swiftshader" in reasons[str(GPU_ONNX_RUNTIME)].lower()
            else:
                assert "adapter" in reasons[str(GPU_ONNX_RUNTIME)]
            # §6.4: the native sink's symbols, the picture within 40 dB of the native CPU decode
            assert result["parts"][0]["symbolsDigest"] == native.part.symbols_digest
            assert pixels is not None and pixels.size == native.rgb.size
            db = psnr(pixels, native.rgb.reshape(-1))
            print(
                f"{gpu} {name}: page {took:.2f} s on cpu/onnx-runtime/float (first includes"
                f" loading the runtime), native {native_took:.2f} s, {db:.1f} dB"
            )
            assert db >= 40.0, db
            assert "ONNX Runtime Web states none" in page.inner_text("#paths")
        screenshot(page, f"onnx-wasm-{gpu}")
        assert sum(u.endswith("ort-wasm-simd-threaded.wasm") for u in requested) == 1
        # the WebGPU build is loaded only for a hardware adapter: neither here
        assert not [u for u in requested if WEBGPU_BUILD in u or "asyncify" in u]


def test_decode_equivalence_loads_no_float_path(site: Any, browser: Any) -> None:
    """A decode that needs decode-equivalence refuses both ONNX Runtime Web paths by §3 before
    asking them: replicate loads no runtime at all; the integer capability loads only the
    WebAssembly build, for cpu/wai-ops/integer (tests/page/test_page_waiops_wasm.py)."""
    with browser([], token=site.token) as page:
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        open_page(page, site.url)
        for name in ["bmshj2018-demo-q3-replicate.json", "int-synth-int8-units-demo-q3.json"]:
            result, _, _ = decode(page, name)
            refused = {
                f"{r['unit']}/{r['backend']}/{r['arithmetic']}": r["reason"]
                for r in result["reports"][0]["refused"]
            }
            assert refused[str(CPU_ONNX_RUNTIME)] == "dispatch_tier_refused"
            assert refused[str(GPU_ONNX_RUNTIME)] == "dispatch_tier_refused"
            if name.startswith("bmshj2018"):
                assert not [u for u in requested if RUNTIME in u]
        assert result["reports"][0]["ran"]["backend"] == "wai-ops"
        assert not [u for u in requested if WEBGPU_BUILD in u or "asyncify" in u]
