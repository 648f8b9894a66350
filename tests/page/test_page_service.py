"""The page's routes on the HTTP service, in process (httpx's ASGITransport; service/web/page.py):
out of the OpenAPI schema, answering what service.web.page_data.PageData holds (with a token:
tests/page/test_page_auth.py holds them to 401 without one); WAI_PAGE=false turns them off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from _svc import _prepared, lifespan_of
from pagekit import ROOT

SET = ROOT / "conformance" / "sets" / "bmshj2018-demo-q3"
pytestmark = pytest.mark.anyio


async def test_page_routes(app: Any, app_client: httpx.AsyncClient) -> None:
    client = app_client
    url = "http://testserver/page/"
    root = url.removesuffix("page/")
    redirect = await client.get(root + "page", follow_redirects=False)
    assert redirect.status_code == 308 and redirect.headers["location"] == url
    index = await client.get(url)
    assert index.status_code == 200
    assert index.headers["content-type"].startswith("text/html")

    js = await client.get(url + "js/dispatch/rules.js")
    assert js.headers["content-type"].startswith("text/javascript")
    assert (await client.get(url + "samples.json")).json() == app.state.page_data.sample_names()
    digest = (await client.get(url + "sets/default/wai.neural.bmshj2018")).json()["digest"]
    tables = await client.get(url + f"sets/{digest}/files/cdfs_q3.json")
    assert tables.content == (SET / "cdfs_q3.json").read_bytes()
    manifest = (await client.get(url + f"sets/{digest}/manifest.json")).json()
    assert manifest["capability"] == "wai.neural.bmshj2018"
    for path, status, code in [
        ("sets/default/wai.neural.nothing", 404, "set_not_installed"),
        (f"sets/{'0' * 64}/manifest.json", 404, "set_not_installed"),
        (f"sets/{digest}/files/nothing.bin", 404, "set_file_missing"),
        ("samples/nothing.json", 404, "page_not_found"),
        ("..%2F..%2Fpyproject.toml", 404, "page_not_found"),
        ("js%2F..%2F..%2Fpage.py", 404, "page_not_found"),
        (".hidden", 404, "page_not_found"),
    ]:
        res = await client.get(url + path)
        assert (res.status_code, res.json()["error"]["code"]) == (status, code), path
    reference = (await client.get(url + "reference/bmshj2018-demo-q3.json")).json()
    payload_info = json.loads((SET / "payload.json").read_text(encoding="utf-8"))
    assert reference["symbols_digest"] == payload_info["symbols_digest"]
    assert reference["reports"][0]["ran"]["backend"] == "onnx-runtime"
    schema = (await client.get(root + "openapi.json")).json()
    assert not any(p.startswith("/page") for p in schema["paths"])


async def test_page_off(tmp_path: Path) -> None:
    app, _ = _prepared(tmp_path / "data", 8000, page=False)
    transport = httpx.ASGITransport(app=app)
    async with (
        lifespan_of(app),
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as client,
    ):
        res = await client.get("/page/index.html")
        assert res.status_code == 404
        assert res.json()["error"]["code"] == "not_found"


async def test_the_waiops_graph_is_the_native_engines(
    app: Any, app_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cpu/wai-ops/integer's graph and its square-root check are the native float32 engine's
    bytes; a program whose bounds reach 2^24 has no graph (page_not_found)."""
    from dataclasses import replace

    from wai_dispatch.paths.waiops.adapter import load_set_program
    from wai_dispatch.paths.waiops.onnx_engine import build_model, isqrt_check_model
    from wai_dispatch.service.web import page_data

    url = "http://testserver/page/"
    digest = (await app_client.get(url + "sets/default/wai.neural.int_synth")).json()["digest"]
    graph = await app_client.get(url + f"sets/{digest}/waiops/float32.onnx")
    assert graph.status_code == 200
    program = load_set_program(app.state.page_data.open(digest))
    assert graph.content == build_model(program)
    check = await app_client.get(url + "waiops/isqrt-check")
    assert check.content == isqrt_check_model()
    app.state.page_data.waiops_graphs.clear()
    monkeypatch.setattr(page_data, "load_set_program", lambda f: replace(program, largest=1 << 24))
    refused = await app_client.get(url + f"sets/{digest}/waiops/float32.onnx")
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "page_not_found")
    assert "float32-exact" in refused.json()["error"]["message"]
