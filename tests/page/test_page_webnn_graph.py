"""The page's WebNN synthesis, end to end, where a context is given: in Debian's Chromium with
a plain-JavaScript WebNN stand-in (tests/page/webnn_reference.js, test-only) the page builds the
synthesis from the set's WebNN form (GraphJson, weights manifest, float32 weights), with each
transposed convolution unpadded and followed by its slice (§6.2), runs it on the first context
it is given (the neural processor's), and reports ``npu/webnn/float`` at tier none with
placement null. The picture agrees with the native ONNX Runtime decode under §6.4: the same
symbols digest and at least 40 dB PSNR."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pagekit import (
    ROOT,
    open_page,
    screenshot,
    serve_service,
)

from wai_dispatch.dispatch import Report

SAMPLE = ROOT / "conformance" / "envelopes" / "bmshj2018-demo-q3.json"
pytestmark = pytest.mark.slow  # the module's fixture decodes in the browser
REFERENCE_WEBNN = (ROOT / "tests" / "page" / "webnn_reference.js").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def decoded(
    tmp_path_factory: pytest.TempPathFactory, browser: Any
) -> Iterator[tuple[Any, Any, Any, Any]]:
    with (
        serve_service(tmp_path_factory.mktemp("graph")) as (url, site, token),
        browser([], init_script=REFERENCE_WEBNN, token=token) as page,
    ):
        open_page(page, url)
        page.select_option("#sample", SAMPLE.name)
        result = page.evaluate("window.waiPage.decodeSample()")
        assert page.errors == []
        pixels = np.array(page.evaluate("Array.from(window.waiPage.picture.data)"), np.uint8)
        screenshot(page, "webnn-reference-context-ran")
        native = site.decoder.decode(SAMPLE.read_bytes())  # the service's own decode
        assert str(native.reports[-1].ran.path) == "cpu/onnx-runtime/float"
        contexts = page.evaluate("window.__contexts")
        yield result, pixels, native, contexts


def test_ran_on_the_first_context(decoded: tuple[Any, Any, Any, Any]) -> None:
    result, _, _, contexts = decoded
    assert result["decoded"] is True
    assert contexts == ["npu"]  # the first context the browser gives is the decode's
    report = result["reports"][0]
    assert report["ran"] == {
        "unit": "npu",
        "backend": "webnn",
        "arithmetic": "float",
        "tier": "none",
        "placement": None,
    }
    assert report["refused"] == []
    Report.from_json(report)


def test_agrees_with_onnx_runtime(decoded: tuple[Any, Any, Any, Any]) -> None:
    """§6.4: the same symbols digest, and the RGB8 picture within 40 dB PSNR of the reference."""
    result, pixels, native, _ = decoded
    assert result["parts"][0]["symbolsDigest"] == native.part.symbols_digest
    assert result["picture"]["width"] == 256 and result["picture"]["height"] == 256
    ref = native.rgb.astype(np.float64).reshape(-1)
    mse = float(np.mean((pixels.astype(np.float64) - ref) ** 2))
    psnr = math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)
    print(f"page (reference WebNN) vs ONNX Runtime: {psnr:.2f} dB")
    assert psnr >= 40.0, psnr
    assert int(np.max(np.abs(pixels.astype(np.int16) - native.rgb.reshape(-1)))) <= 2
