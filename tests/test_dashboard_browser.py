"""The operator dashboard in a real browser (Debian's Chromium through Playwright): it renders
seeded data, filters and the drill-down change what is shown, a wrong-role or unknown token is
sent back to login, and the page asks nothing of any origin but the service's."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests._browser import chromium, require_browser, screenshot
from wai_dispatch.service.dashboard import files

PORT = 18231
OPERATOR, SINK = "op-secret", "sink-secret"
NOW = 1_796_000_000_000

REPORTS = [
    {
        "id": f"r{i}",
        "time_ms": NOW - i * 60_000,
        "sink": sink,
        "capability": "wai.neural.bmshj2018",
        "set": "a" * 64,
        "symbols_digest": "4" * 64,
        "path": path,
        "tier": "none" if path else None,
        "outcome": "decoded" if path else "refused",
        "source": "service",
        "report": {"kind": "wai-neural-dispatch/1", "capability": "wai.neural.bmshj2018"},
    }
    for i, (sink, path) in enumerate(
        [("kiosk-01", "npu/model-runtime/float"), ("kiosk-02", "cpu/onnx-runtime/float")] * 3
        + [("kiosk-02", None)]
    )
]


def _summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[tuple[Any, Any], int] = {}
    for r in items:
        by[(r["path"], r["tier"])] = by.get((r["path"], r["tier"]), 0) + 1
    return {
        "reports": len(items),
        "by_path": [{"path": p, "tier": t, "count": n} for (p, t), n in by.items()],
        "refusals": {"dispatch_unit_absent": sum(1 for r in items if r["path"] != "npu")},
        "placement": {"npu": 0.75, "gpu": 0.0, "cpu": 0.25, "unknown": 0.0},
        "bucket_s": 3600,
        "over_time": [{"start_ms": NOW - NOW % 3_600_000, "decoded": len(items), "refused": 1}],
    }


class Fixture(BaseHTTPRequestHandler):
    """A stand-in for the service's routes the page reads (until the service is merged)."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path.startswith("/dashboard/"):
            name = url.path.removeprefix("/dashboard/") or "index.html"
            kind = {"html": "text/html", "js": "text/javascript", "css": "text/css"}
            node = files().joinpath(*name.split("/"))
            if ".." in name or not node.is_file():
                return self._send(404, b"", "text/plain")
            return self._send(200, node.read_bytes(), kind[name.rsplit(".", 1)[-1]])
        auth = self.headers.get("Authorization", "")
        if auth != f"Bearer {OPERATOR}":
            status = 403 if auth == f"Bearer {SINK}" else 401
            body = {"error": {"code": "role_forbidden" if status == 403 else "token_unknown",
                              "message": "no"}}  # fmt: skip
            return self._send(status, json.dumps(body).encode(), "application/json")
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        items = [r for r in REPORTS if q.get("sink") in (None, r["sink"])]
        if url.path == "/v1/reports/summary":
            out: Any = _summary(items)
        elif url.path == "/v1/reports":
            out = {"items": items, "next": None}
        elif url.path.startswith("/v1/reports/"):
            out = next(r for r in REPORTS if r["id"] == url.path.rsplit("/", 1)[1])
        elif url.path == "/v1/run-reports/summary":
            out = {
                "policy": {"version": 2, "set_by": "ana", "set_ms": NOW},
                "classes": [{"class": "kiosk", "runs_accepted": 3, "runs_refused": 1}],
                "latest_refused": [
                    {
                        "id": "run-7",
                        "sink": "kiosk-02",
                        "class": "kiosk",
                        "received_ms": NOW,
                        "policy_version": 2,
                        "reasons": [
                            {"index": 0, "rule": "set_not_allowed", "message": "not this set"}
                        ],
                    }
                ],
            }
        else:
            return self._send(404, b"{}", "application/json")
        self._send(200, json.dumps(out).encode(), "application/json")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    require_browser()
    httpd = ThreadingHTTPServer(("127.0.0.1", PORT), Fixture)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{PORT}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _login(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/dashboard/")
    page.fill("#token", token)
    page.click("#login-form button[type=submit]")


def test_dashboard_renders_filters_and_drills_down(server: str) -> None:
    with chromium() as browser:
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        _login(page, server, OPERATOR)
        page.wait_for_selector("#status:has-text('updated')")
        assert page.inner_text("#total") == "7 reports"
        assert page.locator("#chart-time canvas").count() >= 1  # uPlot drew the series
        paths = page.inner_text("#t-paths tbody")
        assert "npu/model-runtime/float" in paths and "none ran" in paths
        assert "dispatch_unit_absent" in page.inner_text("#t-refusals tbody")
        assert "75.0 %" in page.inner_text("#t-placement tbody")
        assert "75.0 %" in page.inner_text("#t-classes tbody")
        assert "set_not_allowed · not this set" in page.inner_text("#t-runs tbody")
        assert page.locator("#t-decodes tbody tr").count() == 7
        screenshot(page, "fixture-dashboard")

        page.fill("#f-sink", "kiosk-01")
        page.click("#filters button[type=submit]")
        page.wait_for_function("document.querySelector('#total').textContent === '3 reports'")
        assert page.locator("#t-decodes tbody tr").count() == 3
        assert "none ran" not in page.inner_text("#t-paths tbody")

        page.click("#t-decodes tbody tr >> nth=0")
        page.wait_for_selector("#detail:not([hidden])")
        assert page.inner_text("#d-set") == "a" * 64
        assert page.inner_text("#d-symbols") == "4" * 64
        assert json.loads(page.inner_text("#d-report"))["kind"] == "wai-neural-dispatch/1"
        screenshot(page, "fixture-drilldown")
    assert requests, "the page made no request"
    assert {urlsplit(u).netloc for u in requests} == {f"127.0.0.1:{PORT}"}


@pytest.mark.parametrize(("token", "shown"), [(SINK, "403"), ("expired-or-unknown", "401")])
def test_a_refused_token_is_sent_back_to_login(server: str, token: str, shown: str) -> None:
    with chromium() as browser:
        page = browser.new_page()
        _login(page, server, token)
        page.wait_for_selector("#login-view:not([hidden])")
        page.wait_for_function("document.querySelector('#login-message').textContent !== ''")
        assert shown in page.inner_text("#login-message")
        assert page.evaluate("sessionStorage.getItem('wai-dispatch.token')") is None
        assert page.is_hidden("#dash-view")
