"""Issue 29, item 8: statuses by class. A set archive that lacks a file its manifest lists, or
an empty tar, is malformed input: 422 ``set_archive_invalid`` naming the problem (it was 404
``set_file_missing``, the status of a resource the server lacks)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from wai_dispatch.conformance import sets_dir


def _tar(folder: Path | None, leave_out: str | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        if folder is not None:
            for path in sorted(folder.iterdir()):
                if path.name != leave_out:
                    tar.add(path, arcname=path.name)
    return out.getvalue()


def test_an_incomplete_or_empty_archive_is_422(app_service: Any) -> None:
    folder = Path(sets_dir()) / "int-synth-int8-units-demo-q3"
    listed = next(p.name for p in sorted(folder.iterdir()) if p.name != "set.json")
    headers = {"Content-Type": "application/x-tar"}
    with app_service.client("admin") as client:
        for body, named in ((_tar(folder, leave_out=listed), listed), (_tar(None), None)):
            r = client.post("/v1/sets", content=body, headers=headers)
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["code"] == "set_archive_invalid", r.text
            if named is not None:
                assert named in error["message"]


async def _raw(app: Any, headers: list[tuple[bytes, bytes]], body: bytes) -> tuple[int, Any, Any]:
    """One ``POST /v1/decode`` through the whole ASGI stack with exactly these headers (a
    declared length the body need not have), and how much of the body the app asked for."""
    sent: list[Any] = []
    asked = [0]

    async def receive() -> Any:
        asked[0] += 1
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
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
        "headers": [(b"host", b"t"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    import json

    return start["status"], dict(start["headers"]), (json.loads(data), asked[0])


def _budget(app: Any) -> Any:
    from wai_dispatch.service.http.edge import BodyBudget

    layer = app.middleware_stack
    while not isinstance(layer, BodyBudget):
        layer = layer.app
    return layer


def test_a_declared_length_over_a_cap_is_413_before_any_read(app_service: Any) -> None:
    """Issue 29, item 8: 1 TiB declared with a 2-byte body is 413 ``body_too_large`` (it was
    429 ``bodies_busy``, "retry later"), the body never asked for; a declared length over
    ``max_body_bytes`` is 413 however busy the bodies budget is; only a body the route would
    read meets the budget's 429."""
    app = app_service.app
    with app_service.client() as c:  # the middleware stack built
        assert c.get("/healthz").status_code == 200
    auth = (b"authorization", f"Bearer {app_service.tokens['sink']}".encode())
    kind = (b"content-type", b"application/json")
    settings = app_service.service.settings

    def post(length: int) -> tuple[int, Any, Any]:
        headers = [auth, kind, (b"content-length", str(length).encode())]
        return app_service.portal.call(_raw, app, headers, b"{}")

    status, _, (body, asked) = post(1 << 40)
    assert (status, body["error"]["code"], asked) == (413, "body_too_large", 0)
    budget = _budget(app)
    budget.held = budget.limit - 1024  # other bodies being read fill the budget
    try:
        status, _, (body, asked) = post(settings.max_body_bytes + 1)
        assert (status, body["error"]["code"], asked) == (413, "body_too_large", 0)
        assert "max_body_bytes" in body["error"]["message"]
        status, headers, (body, asked) = post(4096)
        assert (status, body["error"]["code"], asked) == (429, "bodies_busy", 0)
        assert headers[b"retry-after"] == b"1"
    finally:
        budget.held -= budget.limit - 1024
    assert budget.held == 0
