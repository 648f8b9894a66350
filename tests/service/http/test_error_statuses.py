"""Every error code's HTTP status comes from its class (its kind, or the HTTP layer's own case:
service/http/errors.py): each error class of the registry (tools/error_registry.py), raised
through the real application's exception handlers, answers its status with its code in the
body; the HTTP layer's own refusals and an internal fault answer theirs; the page's error
answers use the same statuses. In process, no server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.http.app import create_app
from wai_dispatch.service.http.errors import QueueFull, ServiceError
from wai_dispatch.service.settings import Settings
from wai_dispatch.service.web.dashboard import dashboard_dir
from wai_dispatch.service.web.page import page_dir
from wai_dispatch.tools.error_registry import entries
from wai_dispatch.tools.error_registry import status as status_of

#: Each error class that reaches the service, by its code.
CLASSES = {e.code: e.error for e in entries() if e.status is not None}


def _instance(error: type[WaiError], message: str) -> WaiError:
    """An error of this class with ``message``, whatever its constructor takes."""
    made = error.__new__(error)
    Exception.__init__(made, message)
    if isinstance(made, ServiceError):
        made.headers = {}
    return made


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
        raise _instance(CLASSES[code], f"raised as {code}")

    @app.get("/_busy")
    def busy() -> None:
        raise QueueFull("full", retry_after_s=7, headers={"x-queue": "full"})

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


def test_every_code_answers_its_classs_status(tmp_path: Path) -> None:
    client = _client(tmp_path)
    for code in CLASSES:
        res = client.get(f"/_raise/{code}")
        assert (res.status_code, _error(res)) == (status_of(code), code), code
    assert len(CLASSES) >= 100
    res = client.get("/_busy")
    assert (res.status_code, _error(res)) == (429, "queue_full")
    assert res.headers["retry-after"] == "7" and res.headers["x-queue"] == "full"


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
        (client.get("/no/such/route"), "not_found"),
        (client.post("/_bug"), "method_not_allowed"),
        (client.get("/_count", params={"n": "many"}), "request_invalid"),
        (client.get("/_bug"), "internal_error"),
    ]:
        assert (res.status_code, _error(res)) == (status_of(code), code), code
    assert status_of("internal_error") == 500


def test_the_static_trees_answer_refusals_from_the_registry(tmp_path: Path) -> None:
    """The page's and the dashboard's files are served by ``WebAssets``: a missing file, and a
    file that is no web asset (package source, a dotfile), are typed refusals with the
    registry's status; a served file carries the page's Content-Security-Policy."""
    client = _client(tmp_path)
    for url, code in [
        ("/page/no-such-file.html", "page_not_found"),
        ("/page/.hidden", "page_not_found"),
        ("/page/js%2F..%2F..%2Fpage.py", "page_not_found"),
        ("/dashboard/__init__.py", "not_found"),
        ("/dashboard/nothing.js", "not_found"),
    ]:
        res = client.get(url)
        assert (res.status_code, _error(res)) == (status_of(code), code), url
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
