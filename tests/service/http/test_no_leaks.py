"""Issue 16, items 1, 5 and 6 through the HTTP service in process: no server path in any
answer, a set that is not installed is a 404 naming it, Swagger UI off by default, a cursor past
int64 refused typed, and a client that goes away mid-body is its own counted event."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _svc import SAMPLE_JSON, InProcess, in_process

MISSING = "0" * 64


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with in_process(tmp_path_factory.mktemp("leaks") / "data") as running:
        yield running


def _no_server_path(live: InProcess, text: str) -> None:
    root = live.service.settings.data_dir
    for form in {str(root), str(root.resolve())}:
        assert form not in text
    assert str(Path(__file__).resolve().parents[3]) not in text  # nor the package's own


def test_sets_show_no_server_path(live: InProcess) -> None:
    with live.client("sink") as c:
        listed = c.get("/v1/sets")
        digest = listed.json()["sets"][0]["digest"]
        one = c.get(f"/v1/sets/{digest}")
    assert listed.status_code == one.status_code == 200
    assert "path" not in listed.json()["sets"][0] and "path" not in one.json()
    _no_server_path(live, listed.text + one.text)


def test_a_set_not_installed_is_404_naming_it(live: InProcess) -> None:
    obj = json.loads(SAMPLE_JSON.read_bytes())
    obj["set"] = MISSING
    with live.client("sink") as c:
        r = c.post("/v1/decode", json=obj)
    assert r.status_code == 404, r.text
    body = r.json()
    assert body["error"]["code"] == "set_not_installed"
    assert body["error"]["message"] == f"set {MISSING} is not installed here"
    reasons = {x["reason"] for x in body["reports"][0]["refused"]}
    assert "dispatch_program_absent" in reasons  # the reports are kept, path by path
    assert len(body["report_ids"]) == 1
    _no_server_path(live, r.text)


def test_every_error_here_names_no_server_path(live: InProcess) -> None:
    """The errors the routes give for bad input, each grepped for the data directory."""
    sample = json.loads(SAMPLE_JSON.read_bytes())
    bad_payload = {**sample, "payload": base64.b64encode(b"WAI" + b"\0" * 40).decode()}
    with live.client("sink") as sink, live.client("admin") as admin:
        answers = [
            sink.post("/v1/decode", json={**sample, "set": MISSING}),
            sink.post("/v1/decode", json=bad_payload),
            sink.get(f"/v1/sets/{MISSING}"),
            sink.get("/v1/reports", params={"cursor": "nope"}),
            sink.get("/v1/reports/nope"),
            sink.get("/v1/run-reports/nope"),
            admin.post(
                "/v1/sets", content=b"not a tarball", headers={"Content-Type": "application/gzip"}
            ),
            admin.delete(f"/v1/sets/{MISSING}"),
            admin.put("/v1/policy", content=b"a: [1"),
        ]
    for r in answers:
        assert 400 <= r.status_code < 500, r.text
        _no_server_path(live, r.text)


def test_a_cursor_past_int64_is_cursor_invalid(live: InProcess) -> None:
    for seq in (2**63, 10**19, 99_999_999_999_999_999_999):
        cursor = base64.urlsafe_b64encode(f"r{seq}".encode()).decode().rstrip("=")
        with live.client("operator") as c:
            r = c.get("/v1/reports", params={"cursor": cursor})
        assert (r.status_code, r.json()["error"]["code"]) == (422, "cursor_invalid"), r.text


def test_swagger_ui_is_off_by_default(live: InProcess) -> None:
    with live.client(None) as c:
        assert c.get("/docs").status_code == 404
        assert c.get("/redoc").status_code == 404
        assert c.get("/openapi.json").status_code == 200


def test_swagger_ui_when_asked_for(tmp_path: Path) -> None:
    with in_process(tmp_path / "data", docs=True) as running, running.client(None) as c:
        assert c.get("/docs").status_code == 200


def test_a_client_gone_mid_body_is_counted_not_an_internal_error(
    live: InProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The body's second chunk never comes: the client disconnected. Logged at info, counted
    as client_disconnected, no traceback, no internal_error."""
    app = live.app
    token = live.tokens["sink"]
    sent: list[dict[str, Any]] = []
    chunks = [
        {"type": "http.request", "body": b'{"format": "wai-envelope/1"', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/decode",
        "raw_path": b"/v1/decode",
        "query_string": b"",
        "root_path": "",
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1234),
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {token}".encode()),
        ],
    }
    metric = live.service.metrics.errors.labels("client_disconnected")
    before = metric._value.get()
    with caplog.at_level(logging.INFO):
        live.portal.call(app, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 400
    assert metric._value.get() == before + 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert any(r.getMessage() == "client disconnected" for r in caplog.records)


def test_every_client_of_the_suite_checks_its_error_answers() -> None:
    """tests/_leaks.py's hook is on every httpx client the suite makes: an error answer naming
    the repository, a temporary path or a traceback fails the request (and the test, even when
    the error is swallowed); the same text echoed from the client's own request does not; a
    success is not checked."""
    import _leaks
    import httpx

    repo = str(Path(__file__).resolve().parents[3])

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        status, body = {
            "/repo": (404, f"no such file {repo}/x"),
            "/tmp": (422, "cannot read /tmp/pytest-of-x/data/sets"),
            "/trace": (500, "Traceback (most recent call last):"),
            "/ok": (200, f"{repo} is fine in a success"),
        }.get(scope["path"], (404, scope["path"]))
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body.encode()})

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for path in ("/repo", "/tmp", "/trace"):
                with pytest.raises(AssertionError, match="an error answer names"):
                    await client.get(path)
            assert (await client.get("/ok")).status_code == 200
            echoed = await client.get("/tmp/echoed")  # the client's own text, echoed back
            assert echoed.status_code == 404

    import anyio

    anyio.run(run)
    trace = httpx.MockTransport(lambda request: httpx.Response(500, text="Traceback ..."))
    with httpx.Client(transport=trace) as sync, pytest.raises(AssertionError):
        sync.get("http://t/x")
    assert len(_leaks.FOUND) == 4
    _leaks.FOUND.clear()
