"""Issue 36, item 1 through the HTTP service in process, on SQLite and PostgreSQL: every paging
cursor is typed by its list and sort (each part's type, ints within a BIGINT), so a cursor of
the wrong type or past int64 is 422 ``cursor_invalid``, never a 500; a filter value the
vocabulary cannot hold (a path, a refusal code, a tier, a set that is no digest, an error code)
is 422, not an empty list. Item 2: a
500 leaves the keep-alive connection it was answered on usable."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _svc import SAMPLE_JSON, in_process, pg_database, serve

BIG = [2**63, -(2**63) - 1, 10**30]


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)], scope="module"
)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with contextlib.ExitStack() as stack:
        url = {}
        if request.param == "postgresql":
            admin = request.getfixturevalue("postgres")
            url["database_url"] = stack.enter_context(pg_database(admin))
        running = stack.enter_context(in_process(tmp_path_factory.mktemp("params"), **url))
        with running.client() as c:  # a row in every list: a cursor is compared with it
            assert c.post("/v1/decode", content=SAMPLE_JSON.read_bytes()).status_code == 200
            assert c.get("/v1/sets/" + "0" * 64).status_code == 404  # a request error
        yield running


def cursor(*parts: Any) -> str:
    text = json.dumps(list(parts), separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _forms(tag: str, sort: str) -> list[str]:
    """Cursors for the list ``tag`` whose value or key has a type or size no row has."""
    values: list[Any] = [True, [], {}, *BIG]
    values += {
        "sink": [1, 1.5, None],
        "set": [1, 1.5, None],
        "no_path_rate": ["x"],
        "last_seen_ms": ["x", 1.5],
    }.get(sort, ["x", 1.5, None])
    good = "a" if sort in ("sink", "set") else 1
    return [cursor(tag, v, "a") for v in values] + [
        cursor(tag, good, k) for k in (7, None, True, ["a"])
    ]


CASES = [
    *[
        (f"/v1/fleet/sinks?sort={s}", f"sink:{s}:0")
        for s in ("sink", "reports", "last_seen_ms", "no_path_rate", "runs_refused")
    ],
    *[
        (f"/v1/fleet/sets?sort={s}", f"set:{s}:1")
        for s in ("set", "reports", "sinks", "last_seen_ms", "no_path_rate")
    ],
]


@pytest.mark.parametrize(("url", "tag"), CASES)
def test_a_fleet_cursor_of_the_wrong_type_is_cursor_invalid(live: Any, url: str, tag: str) -> None:
    url, sort, desc = url.split("?sort=")[0], tag.split(":")[1], tag.endswith(":1")
    bad = _forms(tag, sort)
    with live.client("operator") as c:
        for form in bad:
            r = c.get(url, params={"after": form, "sort": sort, "desc": desc})
            assert (r.status_code, r.json()["error"]["code"]) == (422, "cursor_invalid"), (
                form,
                r.text,
            )
        for ok in [cursor(tag, "a" if sort in ("sink", "set") else 2**63 - 1, "b")]:
            assert c.get(url, params={"after": ok, "sort": sort, "desc": desc}).status_code == 200


@pytest.mark.parametrize(
    ("url", "name", "tag"),
    [
        ("/v1/request-errors", "after", "e"),
        ("/v1/run-reports/summary", "after", "rr"),
        ("/v1/reports", "cursor", "t"),
    ],
)
def test_a_cursor_past_bigint_or_of_the_wrong_type_is_cursor_invalid(
    live: Any, url: str, name: str, tag: str
) -> None:
    forms = [cursor(tag, v, 1) for v in [*BIG, "1", 1.0, None]] + [cursor(tag, 1, 2**63)]
    with live.client("operator") as c:
        for form in forms:
            r = c.get(url, params={name: form})
            assert (r.status_code, r.json()["error"]["code"]) == (422, "cursor_invalid"), (
                form,
                r.text,
            )
        edge = cursor(tag, 2**63 - 1, 2**63 - 1)
        assert c.get(url, params={name: edge}).status_code == 200
        assert c.get(url, params={name: cursor(tag, -(2**63), 0)}).status_code == 200


@pytest.mark.parametrize(
    ("param", "value", "code"),
    [
        ("path", "npu/wai-ops/integer", "invalid_offer"),
        ("path", "cpu/onnx-runtime", "invalid_offer"),
        ("path", "tpu/onnx-runtime/float", "unknown_token"),
        ("reason", "not_a_code", "unknown_token"),
        ("tier", "exact", "unknown_token"),
    ],
)
def test_a_filter_value_no_report_can_have_is_422(
    live: Any, param: str, value: str, code: str
) -> None:
    with live.client("operator") as c:
        for url in ("/v1/reports", "/v1/reports/summary", "/v1/fleet/sinks"):
            r = c.get(url, params={param: value})
            assert (r.status_code, r.json()["error"]["code"]) == (422, code), (url, r.text)
        for good in (
            {"path": "none"},
            {"path": "cpu/onnx-runtime/float"},
            {"reason": "dispatch_tier_refused"},
            {"tier": "none"},
        ):
            assert c.get("/v1/reports", params=good).status_code == 200


def test_a_set_or_error_code_no_row_can_have_is_422(live: Any) -> None:
    with live.client("operator") as c:
        for bad in ("AB" * 32, "ab" * 31, "xyz"):
            r = c.get("/v1/reports", params={"set": bad})
            assert (r.status_code, r.json()["error"]["code"]) == (422, "request_invalid")
        r = c.get("/v1/request-errors", params={"code": "no_such_code"})
        assert (r.status_code, r.json()["error"]["code"]) == (422, "unknown_token")
        for good in ("set_not_installed", "http_404"):
            assert c.get("/v1/request-errors", params={"code": good}).status_code == 200
        assert c.get("/v1/reports", params={"set": "ab" * 32}).status_code == 200


def _exchange(sock: socket.socket, path: str, token: str) -> tuple[int, dict[str, str], bytes]:
    """One request on ``sock`` (kept alive) and its whole answer."""
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n"
        "X-Request-Id: poison-1\r\n\r\n".encode()
    )
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return int(lines[0].split()[1]), headers, body


def test_a_500_leaves_the_keep_alive_connection_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2: an unexpected error answers 500 with its request id; the same connection (a raw
    socket to a real uvicorn) then answers the next request."""
    from wai_dispatch.service.http.routes import fleet

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("injected: a fault no handler knows")

    monkeypatch.setattr(fleet, "set_table", boom)
    with serve(tmp_path / "data") as live:
        host, port = live.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            token = live.tokens["operator"]
            status, headers, body = _exchange(sock, "/v1/fleet/sets", token)
            assert status == 500 and headers["x-request-id"] == "poison-1"
            assert json.loads(body)["error"]["code"] == "internal_error"
            assert json.loads(body)["request_id"] == "poison-1"
            status, _, body = _exchange(sock, "/v1/fleet/sinks", token)
            assert status == 200, body
