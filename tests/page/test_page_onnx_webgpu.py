"""The page's ``gpu/onnx-runtime/float`` (js/onnx.js: ONNX Runtime Web 1.30.0's WebGPU build, its
``webgpu`` execution provider) in Debian's Chromium on SwiftShader (``--enable-unsafe-webgpu
--use-webgpu-adapter=swiftshader``), the only WebGPU adapter here.

SwiftShader is a software adapter, so a decode through the page's dispatch refuses the path
(``dispatch_not_placed``, tests/page/test_page_onnx.py) and never fetches the WebGPU build. Here,
as tests/page/test_page_webgpu.py runs the WGSL kernels, the path's adapter runs anyway: every
float sample's ``decoder.onnx`` through the vendored WebGPU build on SwiftShader's device, its
picture within §6.4's 40 dB of the native CPU decode, the symbols digest the native sink's. Then
the page's dispatch on an adapter disguised as hardware (an init script hides SwiftShader's
name, as only a test may): the offer takes ``gpu/onnx-runtime/float`` before the WebAssembly
path, the report states the unit with ``placement`` null, and the WebAssembly build is not
fetched. Nothing here ran on a hardware GPU."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pagekit import PAGE_OFFER, ROOT, open_page, serve_service

from wai_dispatch.dispatch import REGISTRY, Report, ScriptedAdapter, choose, demand
from wai_dispatch.dispatch.offer import (
    CPU_ONNX_RUNTIME,
    GPU_ONNX_RUNTIME,
)
from wai_dispatch.tools.bench_page import RUN_WEBGPU_ADAPTER as RUN_ADAPTER
from wai_dispatch.tools.bench_page import SWIFTSHADER

ENVELOPES = ROOT / "conformance" / "envelopes"
FLOAT_SAMPLES = ["bmshj2018-demo-q3.json", "bmshj2018-hyperprior-int8-units-demo-q3.json"]
OFFER = PAGE_OFFER  # js/app.js
WEBGPU_BUILD = ("ort.webgpu.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs")
WEBGPU_WASM = "ort-wasm-simd-threaded.asyncify.wasm"
WASM_BUILD = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
# SwiftShader computes each decode on the two shared cores (about 20 s a decode here).
pytestmark = pytest.mark.slow

#: SwiftShader with its name hidden: the page's isSoftware() sees a hardware adapter. Only a test
#: does this, to follow the page's route for a hardware adapter on the one adapter here.
DISGUISE = """
if (navigator.gpu) {
  const request = navigator.gpu.requestAdapter.bind(navigator.gpu);
  navigator.gpu.requestAdapter = async (options) => {
    const adapter = await request(options);
    if (adapter) {
      Object.defineProperty(adapter, "isFallbackAdapter", { value: false });
      Object.defineProperty(adapter, "info", { value: { vendor: "disguised-by-the-test",
        architecture: "", device: "", description: "", subgroupMinSize: 4, subgroupMaxSize: 4 } });
    }
    return adapter;
  };
}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with serve_service(tmp_path_factory.mktemp("onnx-webgpu")) as (url, site, token):
        site.url, site.token = url, token
        yield site


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def native_decode(site: Any, name: str) -> tuple[Any, float]:
    start = time.perf_counter()
    native = site.decoder.decode((ENVELOPES / name).read_bytes())
    return native, time.perf_counter() - start


def fetched(requested: list[str], names: tuple[str, ...]) -> list[str]:
    return [u for u in requested if u.rsplit("/", 1)[-1] in names]


def test_the_webgpu_build_decodes_every_float_sample_on_swiftshader(
    site: Any, browser: Any
) -> None:
    with browser(SWIFTSHADER, token=site.token) as page:
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        open_page(page, site.url)
        assert not fetched(requested, WEBGPU_BUILD)  # lazily: not on the page's load
        for name in FLOAT_SAMPLES:
            got = page.evaluate(RUN_ADAPTER, name)
            assert page.errors == []
            native, native_s = native_decode(site, name)
            # SwiftShader, as it is: present, software, its plan all on the CPU (the dispatch
            # refuses it with dispatch_not_placed)
            assert got["present"] is True and got["software"] is True, got["adapter"]
            assert got["plan"]["gpu"] == 0 and got["plan"]["cpu"] > 0
            assert got["symbolsDigest"] == native.part.symbols_digest
            pixels = np.array(got["pixels"], np.uint8)
            assert pixels.size == native.rgb.size
            db = psnr(pixels, native.rgb.reshape(-1))
            print(
                f"{name}: ONNX Runtime Web webgpu on {got['adapter']}: {got['ms'] / 1000:.2f} s"
                f" (the run; the first includes compiling its shaders), native"
                f" {native_s:.2f} s, {db:.1f} dB, max diff"
                f" {int(np.abs(pixels.astype(int) - native.rgb.reshape(-1)).max())}"
            )
            assert db >= 40.0, db
        # the WebGPU build once, from this service; the WebAssembly build not at all
        assert len(fetched(requested, (WEBGPU_WASM,))) == 1
        assert not fetched(requested, WASM_BUILD)
        assert all(u.startswith(site.url) for u in fetched(requested, WEBGPU_BUILD))


def test_a_hardware_adapter_takes_the_webgpu_path_before_the_wasm_path(
    site: Any, browser: Any
) -> None:
    from wai_dispatch.codec.envelope import parse

    name = FLOAT_SAMPLES[0]
    with browser(SWIFTSHADER, init_script=DISGUISE, token=site.token) as page:
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        open_page(page, site.url)
        page.select_option("#sample", name)
        result: dict[str, Any] = page.evaluate("window.waiPage.decodeSample()")
        assert page.errors == []
        native, _ = native_decode(site, name)
        assert result["decoded"] is True, result
        report = result["reports"][0]
        Report.from_json(report)
        envelope = parse((ENVELOPES / name).read_bytes())
        cap = REGISTRY[envelope.parts()[0].capability]
        needed = demand(cap, intent=envelope.intent, pins=envelope.dispatch_pins())
        adapters = {
            GPU_ONNX_RUNTIME: ScriptedAdapter(GPU_ONNX_RUNTIME),  # states no placement
            CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME),
        }
        assert report == choose(cap, needed, OFFER, adapters).report.to_json()
        assert report["ran"]["unit"] == "gpu" and report["ran"]["placement"] is None
        assert result["parts"][0]["symbolsDigest"] == native.part.symbols_digest
        pixels = page.evaluate("Array.from(window.waiPage.picture.data)")
        assert psnr(np.array(pixels, np.uint8), native.rgb.reshape(-1)) >= 40.0
        assert "ONNX Runtime Web states none" in page.inner_text("#paths")
        assert len(fetched(requested, (WEBGPU_WASM,))) == 1
        assert not fetched(requested, WASM_BUILD)  # the WebAssembly path was not needed
