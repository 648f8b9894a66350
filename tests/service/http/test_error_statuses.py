"""Every error code's HTTP status comes from the HTTP layer's one table (service/http/statuses.py,
over every layer's codes: tools/error_registry.py): each code,
raised as a ``WaiError`` through the real application's exception handlers, answers its
registry status with the code in its body; the HTTP layer's own refusals and an internal fault
answer theirs; the page's error answers use the same statuses. In process, no server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.http.app import create_app
from wai_dispatch.service.http.codes import HttpCode
from wai_dispatch.service.http.errors import ServiceError
from wai_dispatch.service.http.statuses import status_of
from wai_dispatch.service.settings import Settings
from wai_dispatch.service.web.codes import PageCode
from wai_dispatch.service.web.dashboard import dashboard_dir
from wai_dispatch.service.web.page import page_dir
from wai_dispatch.tools.error_registry import codes


class _Client:
    """Requests into the app in process (``httpx.ASGITransport``): no server, no lifespan."""

    def __init__(self, app: FastAPI) -> None:
        self.transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            async with httpx.AsyncClient(transport=self.transport, base_url="http://t") as c:
                return await c.request(method, url, **kwargs)

        return asyncio.run(go())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)


def _client(tmp_path: Path) -> _Client:
    """The real app (its handlers, middleware and routes) with throwaway routes that raise; no
    lifespan, so nothing is opened."""
    app: FastAPI = create_app(Settings(data_dir=tmp_path / "data", warm=False))

    @app.get("/_raise/{code}")
    def raise_code(code: str) -> None:
        raise WaiError(f"raised as {code}", code=code)

    @app.get("/_service/{code}")
    def raise_service(code: str) -> None:
        raise ServiceError(f"raised as {code}", code=code, headers={"retry-after": "7"})

    @app.get("/_bug")
    def bug() -> None:
        raise RuntimeError("a fault of the service")

    @app.get("/_count")
    def count(n: int) -> int:
        return n

    return _Client(app)


def _error(res: httpx.Response) -> str:
    body = res.json()
    assert set(body) == {"error", "request_id"} and body["request_id"], body
    assert set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


def test_every_code_answers_its_registry_status(tmp_path: Path) -> None:
    client = _client(tmp_path)
    seen = 0
    for code in codes():
        res = client.get(f"/_raise/{code.value}")
        assert (res.status_code, _error(res)) == (status_of(code), code.value), code
        res = client.get(f"/_service/{code.value}")
        assert (res.status_code, _error(res)) == (status_of(code), code.value), code
        assert res.headers["retry-after"] == "7"
        seen += 1
    assert seen == len(codes()) >= 100


def test_a_few_statuses_pinned(tmp_path: Path) -> None:
    """The registry's answers for codes clients rely on (a wrong registry entry fails here too)."""
    client = _client(tmp_path)
    for code, status in [
        ("envelope_malformed", 400),
        ("payload_truncated", 422),
        ("body_too_large", 413),
        ("token_missing", 401),
        ("role_forbidden", 403),
        ("set_not_installed", 404),
        ("set_ambiguous", 409),
        ("queue_full", 429),
        ("report_spool_full", 503),
        ("decode_timeout", 504),
    ]:
        assert client.get(f"/_raise/{code}").status_code == status, code


def test_the_http_layers_refusals_and_a_fault_answer_their_registry_status(
    tmp_path: Path,
) -> None:
    client = _client(tmp_path)
    for res, code in [
        (client.get("/no/such/route"), HttpCode.NOT_FOUND),
        (client.post("/_bug"), HttpCode.METHOD_NOT_ALLOWED),
        (client.get("/_count", params={"n": "many"}), HttpCode.REQUEST_INVALID),
        (client.get("/_bug"), HttpCode.INTERNAL_ERROR),
    ]:
        assert (res.status_code, _error(res)) == (status_of(code), code.value), code
    assert status_of(HttpCode.INTERNAL_ERROR) == 500


def test_an_unregistered_code_is_a_500_not_an_answer_with_it(tmp_path: Path) -> None:
    """``WaiError`` refuses the code (TypeError), so what reaches the client is an internal
    error, never the unregistered code with a guessed status."""
    res = _client(tmp_path).get("/_raise/no_such_code")
    assert (res.status_code, _error(res)) == (500, "internal_error")


def test_the_static_trees_answer_refusals_from_the_registry(tmp_path: Path) -> None:
    """The page's and the dashboard's files are served by ``WebAssets``: a missing file, and a
    file that is no web asset (package source, a dotfile), are typed refusals with the
    registry's status; a served file carries the page's Content-Security-Policy."""
    client = _client(tmp_path)
    for url, code in [
        ("/page/no-such-file.html", PageCode.PAGE_NOT_FOUND),
        ("/page/.hidden", PageCode.PAGE_NOT_FOUND),
        ("/page/js%2F..%2F..%2Fpage.py", PageCode.PAGE_NOT_FOUND),
        ("/dashboard/__init__.py", HttpCode.NOT_FOUND),
        ("/dashboard/nothing.js", HttpCode.NOT_FOUND),
    ]:
        res = client.get(url)
        assert (res.status_code, _error(res)) == (status_of(code), code.value), url
    served = client.get("/page/js/app.js")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/javascript")
    assert "default-src 'none'" in served.headers["content-security-policy"]
    assert client.get("/dashboard/").status_code == 200


def test_every_file_of_the_web_trees_is_served(tmp_path: Path) -> None:
    """The asset filter refuses what is not a web asset, never a file a page loads (the
    vendored BLAKE3's ``_blake.js``, a licence text): every file shipped in the two trees
    answers 200 with its bytes."""
    client = _client(tmp_path)
    for mount, root in (("/page", page_dir()), ("/dashboard", dashboard_dir())):
        files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert len(files) > 5
        for path in files:
            res = client.get(f"{mount}/{path.relative_to(root).as_posix()}")
            assert (res.status_code, res.content) == (200, path.read_bytes()), path
