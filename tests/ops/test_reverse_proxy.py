"""The service behind a TLS reverse proxy under a path prefix (docs/operations.md): ``serve``
hands uvicorn ``root_path``, ``proxy_headers`` and ``forwarded_allow_ips`` from the settings;
behind a proxy that strips ``/wai`` and sends ``X-Forwarded-For``/``-Proto``, a redirect keeps
the prefix and the https scheme, the request log names the caller, and the dashboard's files
and every API call it makes resolve under the prefix (its script fetches relative to itself;
and, in a browser, every request of a logged-in dashboard stays under ``/wai`` and succeeds)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import _svc
import httpx
import pytest
import uvicorn
from pagekit import browser_context, wait_until

from wai_dispatch.cli import serve as serve_command
from wai_dispatch.cli.main import main
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools.seed_reports import seed

PREFIX = "/wai"
CALLER = "203.0.113.7"  # the address the proxy saw (TEST-NET-3)


def stripping_proxy(backend: str) -> Any:
    """An ASGI reverse proxy as nginx's ``location /wai/ { proxy_pass http://backend/; }``:
    ``/wai/…`` goes to ``backend/…`` with Host, X-Forwarded-For and X-Forwarded-Proto: https."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        path: str = scope["path"]
        if not path.startswith(PREFIX + "/"):
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"not under the prefix"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in (b"connection",)]
        headers += [(b"x-forwarded-for", CALLER.encode()), (b"x-forwarded-proto", b"https")]
        url = backend + path.removeprefix(PREFIX)
        if scope["query_string"]:
            url += "?" + scope["query_string"].decode()
        async with httpx.AsyncClient() as client:
            answer = await client.request(scope["method"], url, headers=headers, content=body)
        drop = {b"content-length", b"content-encoding", b"transfer-encoding", b"connection"}
        out = [(k, v) for k, v in answer.headers.raw if k.lower() not in drop]
        out.append((b"content-length", str(len(answer.content)).encode()))
        await send({"type": "http.response.start", "status": answer.status_code, "headers": out})
        await send({"type": "http.response.body", "body": answer.content})

    return app


def _run(config: uvicorn.Config) -> tuple[uvicorn.Server, threading.Thread]:
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    return server, thread


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """The service on uvicorn with ``serve``'s proxy arguments (WAI_ROOT_PATH=/wai), behind the
    stripping proxy; the proxy's URL and the tokens."""
    data = tmp_path_factory.mktemp("proxied")
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    store.migrate()
    seed(store, 60, sinks=3, days=0.5)
    store.dispose()
    port, front = _svc.free_port(), _svc.free_port()
    app, tokens = _svc._prepared(data, port, root_path=PREFIX)
    backend = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        root_path=PREFIX,
        proxy_headers=True,
        forwarded_allow_ips="127.0.0.1",
    )
    proxy = uvicorn.Config(
        stripping_proxy(f"http://127.0.0.1:{port}"),
        host="127.0.0.1",
        port=front,
        log_config=None,
        access_log=False,
        lifespan="off",
    )
    servers = [_run(backend), _run(proxy)]
    try:
        yield f"http://127.0.0.1:{front}", tokens
    finally:
        for server, thread in reversed(servers):
            server.should_exit = True
            thread.join(timeout=30)


def test_serve_hands_uvicorn_the_proxy_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    given: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: given.update(kw))
    monkeypatch.setattr(serve_command, "hand_over", lambda settings: None)  # no hand-over here
    monkeypatch.setenv("WAI_ROOT_PATH", PREFIX)
    monkeypatch.setenv("WAI_FORWARDED_ALLOW_IPS", "10.0.0.0/8")
    monkeypatch.setenv("WAI_WORKERS", "1")
    assert main(["serve", "--data-dir", str(tmp_path / "data")]) == 0
    capsys.readouterr()
    assert given["root_path"] == PREFIX
    assert given["proxy_headers"] is True
    assert given["forwarded_allow_ips"] == "10.0.0.0/8"
    assert given["workers"] == 1


def test_a_bad_root_path_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from wai_dispatch.service.settings import SettingsInvalid, load

    with pytest.raises(SettingsInvalid, match="root_path"):
        load(root_path="wai/")  # a prefix starts with / and has no trailing /


def test_redirects_logs_and_the_dashboard_under_the_prefix(
    proxied: tuple[str, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    front, tokens = proxied
    with httpx.Client(base_url=front, timeout=60) as c:
        moved = c.get(f"{PREFIX}/dashboard")
        assert moved.status_code == 308
        assert moved.headers["location"] == f"https://{urlsplit(front).netloc}{PREFIX}/dashboard/"
        page_url = f"{front}{PREFIX}/dashboard/"
        page = c.get(page_url)
        assert page.status_code == 200 and "dashboard.js" in page.text
        for asset in re.findall(r'(?:src|href)="([^"]+)"', page.text):
            assert c.get(urljoin(page_url, asset)).status_code == 200, asset
        script = c.get(urljoin(page_url, "dashboard.js")).text
        assert not re.search(r"[\"'`]/v1", script), "an absolute /v1 path in dashboard.js"
        calls = re.findall(r'api\("(v1/[a-z/-]*)', script)
        assert {"v1/reports", "v1/reports/summary", "v1/run-reports/summary"} <= set(calls)
        # api() resolves its path against the service's root, the folder above the page
        assert 'new URL("../", window.location.href)' in script
        root = urljoin(page_url, "../")
        auth = {"Authorization": f"Bearer {tokens['operator']}"}
        with caplog.at_level(logging.INFO, logger="wai_dispatch.service"):
            listing = c.get(urljoin(root, "v1/reports"), headers=auth)
        assert listing.status_code == 200, listing.text
        one = listing.json()["items"][0]["id"]
        for call in {*calls, f"v1/reports/{one}"}:  # the drill-down's call is "v1/reports/" + id
            url = urljoin(root, f"{call}{one}" if call.endswith("/") else call)
            assert url.startswith(f"{front}{PREFIX}/v1/")
            assert c.get(url, headers=auth).status_code == 200, url
    lines = [r for r in caplog.records if r.getMessage() == "request"]
    assert lines and all(r.client.startswith(CALLER + ":") for r in lines)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_dashboard_in_a_browser_under_the_prefix(
    proxied: tuple[str, dict[str, str]], browser: Any
) -> None:
    front, tokens = proxied
    with browser_context() as context:
        page = context.new_page()
        answers: list[tuple[str, int]] = []
        page.on("response", lambda r: answers.append((r.url, r.status)))
        page.goto(f"{front}{PREFIX}/dashboard/")
        page.fill("#token", tokens["operator"])
        page.click("#login-form button[type=submit]")
        wait_until(page, "document.querySelector('#total').textContent === '60 reports'")
    api = [(u, s) for u, s in answers if "/v1/" in u]
    assert api, answers
    assert all(u.startswith(f"{front}{PREFIX}/") for u, _ in answers), answers
    assert all(s == 200 for _, s in answers), answers
