"""The page's WebGPU path, ``gpu/wgsl/integer``, in Debian's Chromium on SwiftShader
(``--enable-unsafe-webgpu --use-webgpu-adapter=swiftshader``: nothing more is needed).

SwiftShader is a fallback (software) adapter: a decode of ``wai.neural.int_synth`` there is
``dispatch_not_placed``, exactly as the Python path on lavapipe (and ``cpu/wai-ops/integer``
then runs it on WebAssembly). The verify view runs the page's
kernels anyway: corpus payloads decode through them to their corpus hashes, whole and banded
(limits lowered). The kernels and their plans are the Python path's (service/web/page_wgsl.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from pagekit import (
    PAGE_OFFER,
    ROOT,
    open_page,
    screenshot,
    serve_service,
)

from wai_dispatch.dispatch import REGISTRY, Report, ScriptedAdapter, choose, demand
from wai_dispatch.dispatch.offer import (
    CPU_WAI_OPS,
    GPU_WGSL,
)
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.tools.bench_page import SWIFTSHADER as GPU_ARGS

CORPUS = json.loads(
    (ROOT / "conformance" / "neural-conformance" / "corpus.json").read_text(encoding="utf-8")
)
# SwiftShader runs the kernels on two shared cores: 0.2 s to 5 min a payload here. The suite
# checks three by default (CI too); WAI_FULL_CORPUS=1 (`make bench`'s long browser run,
# about 4.5 minutes) checks every one.
QUICK = ["chelsea-16x16", "coffee-256x256", "extreme-symbols-320x192"]
SWIFTSHADER_LIMITS = {
    "maxComputeWorkgroupsPerDimension": 65535,
    "maxStorageBufferBindingSize": 1 << 30,
    "maxBufferSize": 1 << 30,
    "maxUniformBufferBindingSize": 65536,
    "maxComputeInvocationsPerWorkgroup": 256,
    "maxComputeWorkgroupSizeX": 256,
    "maxStorageBuffersPerShaderStage": 8,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with serve_service(tmp_path_factory.mktemp("webgpu")) as (url, site, token):
        site.url, site.token = url, token
        yield site


@pytest.fixture
def gpu_page(site: Any, browser: Any) -> Iterator[Any]:
    with browser(GPU_ARGS, token=site.token) as page:
        yield page


def decode_sample(page: Any, url: str, name: str) -> dict[str, Any]:
    open_page(page, url)
    page.select_option("#sample", name)
    result: dict[str, Any] = page.evaluate("window.waiPage.decodeSample()")
    assert page.errors == []
    return result


def verify_int(page: Any, url: str, query: str) -> dict[str, Any]:
    page.goto(f"{url}verify-int.html?{query}")
    page.wait_for_function("() => window.waiVerifyInt && window.waiVerifyInt.done", timeout=900_000)
    summary: dict[str, Any] = page.evaluate("window.waiVerifyInt")
    assert page.errors == []
    return summary


def test_int_synth_not_placed_on_a_fallback_adapter(site: Any, gpu_page: Any) -> None:
    result = decode_sample(gpu_page, site.url, "int-synth-int8-units-demo-q3.json")
    report = result["reports"][0]
    # The Python core on the same facts: the adapter is there, the set holds the program, the
    # plan takes the shape, and the placement is 12 operations on the CPU (§5).
    # Then cpu/wai-ops/integer runs it, every operation on the CPU (WebAssembly).
    cap = REGISTRY["wai.neural.int_synth"]
    wgsl = ScriptedAdapter(GPU_WGSL, placement=Placement(cpu=12))
    wasm = ScriptedAdapter(CPU_WAI_OPS, placement=Placement(cpu=12))
    adapters = {GPU_WGSL: wgsl, CPU_WAI_OPS: wasm}
    expected = choose(cap, demand(cap), PAGE_OFFER, adapters).report.to_json()
    assert report == expected
    assert report["ran"]["backend"] == "wai-ops"
    assert [r["reason"] for r in report["refused"]] == ["dispatch_tier_refused"] * 5 + [
        "dispatch_not_placed"
    ]
    Report.from_json(report)
    assert wgsl.calls == ["unit_present", "program_present", "takes_shape", "plan"]
    assert "swiftshader" in result["reasons"][0]["gpu/wgsl/integer"]
    coffee = next(p for p in CORPUS["payloads"] if p["name"] == "coffee-256x256")
    assert result["parts"][0]["symbolsDigest"] == coffee["symbols_digest"]
    screenshot(gpu_page, "webgpu-not-placed")


def test_int_synth_shape_refused_under_lowered_limits(site: Any, gpu_page: Any) -> None:
    """A plan no variant admits under the adapter's limits is dispatch_shape_mismatch, asked
    before the plan (§4), and nothing is submitted."""
    url = site.url + "?limit.maxStorageBufferBindingSize=1048576"
    result = decode_sample(gpu_page, url, "int-synth-int8-units-demo-q3.json")
    assert result["reports"][0]["refused"][-1]["reason"] == "dispatch_shape_mismatch"
    assert "maxStorageBufferBindingSize" in result["reasons"][0]["gpu/wgsl/integer"]


@pytest.mark.slow
def test_corpus_through_the_page_kernels(site: Any, gpu_page: Any) -> None:
    full = os.environ.get("WAI_FULL_CORPUS") == "1"
    names = [p["name"] for p in CORPUS["payloads"]] if full else QUICK
    summary = verify_int(gpu_page, site.url, "only=" + ",".join(names))
    assert summary["software"] is True
    rows = {row["name"]: row for row in summary["rows"]}
    assert sorted(rows) == sorted(names)
    for entry in CORPUS["payloads"]:
        if entry["name"] in rows:
            row = rows[entry["name"]]
            assert row["got"] == entry["rgb8_blake3"], row
            assert row["symbols"] == entry["symbols_digest"]
    assert summary["verdict"] == "pass"
    screenshot(gpu_page, "webgpu-verify-corpus")


@pytest.mark.slow
def test_banded_kernels(site: Any, gpu_page: Any) -> None:
    """Limits lowered to 4 MiB bindings band the large layers; the hash is unchanged."""
    query = "only=extreme-symbols-320x192&limit.maxStorageBufferBindingSize=4194304"
    summary = verify_int(gpu_page, site.url, query)
    (row,) = summary["rows"]
    assert row["banded"] >= 1
    expected = next(p for p in CORPUS["payloads"] if p["name"] == "extreme-symbols-320x192")
    assert row["got"] == expected["rgb8_blake3"]
    assert summary["verdict"] == "pass"


def _plan(site: Any, limits: dict[str, int], shape: str = "1,192,12,20") -> httpx.Response:
    """The plan route of the running service (the page's data route, over HTTP)."""
    digest = CORPUS["set"]
    query = f"shape={shape}&limits={quote(json.dumps(limits))}"
    auth = {"Authorization": f"Bearer {site.token}"}
    return httpx.get(f"{site.url}sets/{digest}/wgsl/plan?{query}", headers=auth, timeout=60)


def test_the_plan_is_the_python_paths(site: Any) -> None:
    """The page's kernels are the Python path's: the same rendered WGSL and the same dispatch
    sizes, planned by paths.wgsl for the browser's limits."""
    from wai_dispatch.paths.wgsl.descriptor import render
    from wai_dispatch.paths.wgsl.execute import plan_program

    res = _plan(site, SWIFTSHADER_LIMITS)
    assert res.status_code == 200
    plan = res.json()
    program = site.wgsl_programs.get(site.open(CORPUS["set"])).program
    plans = plan_program(program, [1, 192, 12, 20], SWIFTSHADER_LIMITS)
    assert len(plan["operations"]) == len(plans) == len(program.operations)
    for op, kernel, mine in zip(program.operations, plans, plan["operations"], strict=True):
        source = render(kernel.descriptor.name, str(kernel.variant["name"]), op.op)
        assert plan["sources"][mine["source"]] == source
        assert [b["groups"] for b in mine["bands"]] == [
            list(kernel.dispatch(b)) for b in kernel.bands()
        ]


def test_plan_route_refusals(site: Any) -> None:
    tiny = {**SWIFTSHADER_LIMITS, "maxStorageBufferBindingSize": 65536}
    refused = _plan(site, tiny).json()
    assert "maxStorageBufferBindingSize" in refused["refused"]
    for bad in ({}, {**SWIFTSHADER_LIMITS, "maxBufferSize": -1}, {**SWIFTSHADER_LIMITS, "x": 1}):
        res = _plan(site, bad)  # type: ignore[arg-type]
        assert res.status_code == 400
        assert res.json()["error"]["code"] == "page_bad_request"
    for shape in ("1,192,12", "2,192,12,20", "1,192,0,20", "a,b,c,d"):
        assert _plan(site, SWIFTSHADER_LIMITS, shape).json()["error"]["code"] == (
            "page_bad_request"
        )
