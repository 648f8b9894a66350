"""The page's float decode per path (docs/page.md), beside the native decode of the same sample
(``Decoder``, ONNX Runtime), in headless Chromium (Playwright): ``wasm``, the page's own route
on ONNX Runtime Web's WebAssembly build; ``webgpu-swiftshader``, ``gpu/onnx-runtime/float``'s
adapter run directly on SwiftShader (the page's dispatch refuses a software adapter), which
computes on the CPU and says nothing of a hardware GPU.

Each path's first decode includes loading its build and opening the session; ``then`` is the
best of the following ``--repeats``. Ratios are page ÷ native (above 1: the page is slower)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.tools.harness import first_and_best, missing, parser, table
from wai_dispatch.tools.verify_page import TOKEN_KEY, serve_page

CHROMIUM = Path("/usr/bin/chromium")
SAMPLES = ["bmshj2018-demo-q3.json", "bmshj2018-hyperprior-int8-units-demo-q3.json"]
BASE_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update"]
#: Chromium's flags for WebGPU on SwiftShader, the only adapter on a machine without a GPU (the
#: page's WebGPU tests start their browsers with these too).
SWIFTSHADER = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"]

#: The page's own modules: a sample's entropy stage, then gpu/onnx-runtime/float's adapter's run
#: on this browser's adapter, whatever it is (the page's dispatch refuses a software one first).
#: Returns the adapter's answers, the symbols digest, the RGB8 picture and the run's time (ms).
RUN_WEBGPU_ADAPTER = """async (name) => {
  const at = (p) => new URL(p, document.baseURI).href;
  const { SetSource, entropyStage, Job, toRgb8, cropPicture } = await import(at("js/decode.js"));
  const { OrtWebGpuAdapter } = await import(at("js/onnx.js"));
  const { parseEnvelope } = await import(at("js/codec/envelope.js"));
  const { describeAdapter, isSoftware } = await import(at("js/webgpu.js"));
  const { pageFetch } = await import(at("js/auth.js"));
  const res = await pageFetch(`samples/${encodeURIComponent(name)}`);
  const part = parseEnvelope(new Uint8Array(await res.arrayBuffer())).parts[0];
  const source = new SetSource(at("."));
  const digest = part.set ?? (await source.defaultFor(part.capability));
  const manifest = await source.manifest(digest);
  const stage = await entropyStage(source, digest, manifest, part.payload);
  const job = new Job(source, digest, manifest, stage.header, stage.latent, stage.symbols);
  const adapter = new OrtWebGpuAdapter(navigator.gpu);
  const present = await adapter.unitPresent();
  const plan = present ? adapter.plan(job) : null;
  const start = performance.now();
  const out = await adapter.run(job);
  const ms = performance.now() - start;
  const picture = cropPicture(toRgb8(out.xHat, out.shape), stage.header.picture);
  const gpu = adapter.adapter;
  return { present, plan, software: isSoftware(gpu), adapter: describeAdapter(gpu), ms,
           symbolsDigest: stage.symbolsDigest, pixels: Array.from(picture.data) };
}"""


def _page_times(url: str, token: str, args: list[str], path: str, repeats: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright  # lazy: the test extra

    out: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=[*BASE_ARGS, *args]
        )
        try:
            context = browser.new_context()
            context.add_init_script(f"sessionStorage.setItem({TOKEN_KEY!r}, {token!r});")
            page = context.new_page()
            page.goto(url)
            page.wait_for_function("() => window.waiPage && window.waiPage.ready === true")
            for name in SAMPLES[:1] if path == "quick" else SAMPLES:

                def decode(name: str = name) -> object:
                    if path == "webgpu-swiftshader":
                        return page.evaluate(RUN_WEBGPU_ADAPTER, name)
                    page.select_option("#sample", name)
                    return page.evaluate("window.waiPage.decodeSample()")

                out[name] = first_and_best(decode, repeats)
        finally:
            browser.close()
    return out


def _native_times(repeats: int) -> dict[str, Any]:

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        decoder = Decoder.assemble(Path(tmp))
        for name in SAMPLES:
            body = (envelopes_dir() / name).read_bytes()
            out[name] = first_and_best(partial(decoder.decode, body), repeats)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("page", __doc__, repeats=2, quick="one sample, WebAssembly only")
    args = p.parse_args(list(argv or []))
    if missing("page", "playwright", "Playwright, the test extra,"):
        return 0
    if not CHROMIUM.exists():
        print(f"page: skipped ({CHROMIUM} is not installed)")
        return 0

    repeats = 1 if args.quick else args.repeats
    native = _native_times(repeats)
    routes = {"wasm": []} if args.quick else {"wasm": [], "webgpu-swiftshader": SWIFTSHADER}
    rows = []
    with serve_page() as (url, token):
        for path, extra in routes.items():
            got = _page_times(url, token, extra, "quick" if args.quick else path, repeats)
            for name, t in got.items():
                then, anchor = t["then"], native[name]["then"]
                ratio = then / anchor if then and anchor else "—"
                rows.append([path, name, t["first"], then or 0, anchor or 0, ratio])
    table(["path", "sample", "first s", "then s", "native s", "ratio"], rows, "- - .2f .2f .3f .1f")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
