"""Issue 16, item 2: the page's routes that cost work take a token (a sink's or above, as every
page data route: tests/page/test_page_auth.py) and are bounded and admitted as well: a WGSL
plan's shape is bounded like a decode's header (refused before planning), the plans, set reads
and reference decodes run through the service's admission (429 when full), and a sample's
reference decode is made once however many ask for it at once."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from pagekit import ROOT

pytestmark = pytest.mark.anyio

CORPUS = json.loads((ROOT / "conformance" / "neural-conformance" / "corpus.json").read_text())
LIMITS = {
    "maxComputeWorkgroupsPerDimension": 65535,
    "maxStorageBufferBindingSize": 1 << 30,
    "maxBufferSize": 1 << 30,
    "maxUniformBufferBindingSize": 65536,
    "maxComputeInvocationsPerWorkgroup": 256,
    "maxComputeWorkgroupSizeX": 256,
    "maxStorageBuffersPerShaderStage": 8,
}
URL = "http://testserver/page/"


def _sink(app: Any) -> httpx.AsyncClient:
    """A sink's client on ``app`` (the page's data routes take a token)."""
    auth = {"Authorization": f"Bearer {app.state.test_tokens['sink']}"}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), headers=auth)


def _plan(shape: str) -> str:
    return f"{URL}sets/{CORPUS['set']}/wgsl/plan?shape={shape}&limits={quote(json.dumps(LIMITS))}"


async def test_plan_shapes_are_bounded_before_planning(
    app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wai_dispatch.service.web import page_wgsl

    planned: list[tuple[int, ...]] = []
    real = page_wgsl.plan_program

    def counting(program: Any, shape: Any, limits: Any) -> Any:
        planned.append(tuple(shape))
        return real(program, shape, limits)

    monkeypatch.setattr(page_wgsl, "plan_program", counting)
    app.state.service.admission.max_latent_elements = 192 * 64 * 64  # as a service may set it
    async with _sink(app) as client:
        assert (await client.get(_plan("1,192,12,20"))).status_code == 200
        assert planned == [(1, 192, 12, 20)]
        for shape, code in [
            ("1,192,65535,65535", "payload_shape_over_limits"),  # the codec's header limits
            ("1,192,80,80", "latent_over_limit"),  # 1.2 M elements > max_latent_elements
            ("1,2,65535,1", "payload_shape_over_limits"),
        ]:
            res = await client.get(_plan(shape))
            assert (res.status_code, res.json()["error"]["code"]) == (413, code), res.text
        assert planned == [(1, 192, 12, 20)]  # each refused before any planning


async def test_page_work_is_refused_when_admission_is_full(app: Any) -> None:
    admission = app.state.service.admission
    async with _sink(app) as client:
        saved = admission.inflight
        admission.inflight = admission.capacity  # every slot taken
        try:
            for url in [
                _plan("1,192,12,20"),
                f"{URL}sets/{CORPUS['set']}/manifest.json",
                f"{URL}reference/bmshj2018-demo-q3.json",
            ]:
                res = await client.get(url)
                assert (res.status_code, res.json()["error"]["code"]) == (429, "queue_full")
                assert int(res.headers["retry-after"]) >= 1
        finally:
            admission.inflight = saved


async def test_concurrent_first_reference_requests_share_one_decode(
    app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sink(app) as client:
        await client.get(URL + "samples.json")  # the page's data made
        data = app.state.page_data
        made: list[str] = []
        reference = data.reference

        def counted(sample: str, prepared: Any = None) -> dict[str, Any]:
            made.append(sample)
            return reference(sample, prepared)

        monkeypatch.setattr(data, "reference", counted)
        url = URL + "reference/bmshj2018-demo-q3.json"
        answers = await asyncio.gather(*(client.get(url) for _ in range(12)))
        assert [a.status_code for a in answers] == [200] * 12
        assert len({a.content for a in answers}) == 1
        assert made == ["bmshj2018-demo-q3.json"]
        assert (await client.get(url)).content == answers[0].content  # kept
        assert made == ["bmshj2018-demo-q3.json"] and data.computing == {}
        missing = await client.get(URL + "reference/nothing.json")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "page_not_found")
