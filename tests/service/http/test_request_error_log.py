"""Issue 29, item 2, through the service on SQLite and PostgreSQL: every 4xx it answers is in the
request-error log, whoever answered it — the decode's no-path answers (``decode_no_path`` 422,
``set_not_installed`` 404) among them, which a route answers itself — counted by code, route
template and sink; anonymous errors only counted, never kept as rows; ``/favicon.ico`` (the
dashboard's own icon) is served and never an error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _svc import REPLICATE, SAMPLE_JSON, InProcess, in_process, pg_database


@pytest.fixture(params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[InProcess]:
    if request.param == "sqlite":
        with in_process(tmp_path / "data") as running:
            yield running
        return
    with (
        pg_database(request.getfixturevalue("postgres")) as url,
        in_process(tmp_path / "data", database_url=url) as running,
    ):
        yield running


def test_every_4xx_is_logged_and_the_icon_is_not_an_error(live: InProcess) -> None:
    pinned = json.loads(SAMPLE_JSON.read_text())
    pinned["set"] = "ab" * 32  # a set this service does not hold
    json_ct = {"Content-Type": "application/json"}
    with live.client("sink") as sink, live.client(None) as anon, live.client("operator") as op:
        r = sink.post("/v1/decode", content=REPLICATE.read_bytes(), headers=json_ct)
        assert (r.status_code, r.json()["error"]["code"]) == (422, "decode_no_path")
        r = sink.post("/v1/decode", content=json.dumps(pinned), headers=json_ct)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "set_not_installed")
        assert sink.get("/v1/reports/no-such-report").status_code == 404
        for i in range(30):  # anonymous: counted, not kept
            assert anon.get(f"/v1/reports?i={i}").status_code == 401
        icon = anon.get("/favicon.ico")
        assert (icon.status_code, icon.headers["content-type"]) == (200, "image/x-icon")
        assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO
        assert anon.get("/dashboard/favicon.ico").content == icon.content
        assert live.service.errors.flush()
        got = op.get("/v1/request-errors").json()
    by_code = {(r["code"], r["status"]): r["count"] for r in got["by_code"]}
    assert by_code == {
        ("decode_no_path", 422): 1,
        ("set_not_installed", 404): 1,
        ("report_not_found", 404): 1,
        ("token_missing", 401): 30,
    }
    assert {r["sink"]: r["count"] for r in got["by_sink"]} == {"sink-a": 3, None: 30}
    routes = {r["route"]: r["count"] for r in got["by_route"]}
    assert routes == {"/v1/decode": 2, "/v1/reports/{report_id}": 1, "/v1/reports": 30}
    assert sorted((r["code"], r["sink"], r["route"]) for r in got["items"]) == [
        ("decode_no_path", "sink-a", "/v1/decode"),
        ("report_not_found", "sink-a", "/v1/reports/{report_id}"),
        ("set_not_installed", "sink-a", "/v1/decode"),
    ]
    assert got["rows"] == {"kept": 3, "dropped": 0}
