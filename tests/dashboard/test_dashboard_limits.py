"""What the dashboard checks a shared URL's values against comes from the API's own routes
(``/dashboard/limits.json``, made from the service's OpenAPI schema): one place per limit. A
route's limit changed is the page's check changed; a key of the page's that names no
parameter of the API is caught here."""

from __future__ import annotations

from pathlib import Path

from _svc import in_process

from wai_dispatch.service.web.dashboard import SENT_AS, url_limits


def test_the_page_is_told_each_keys_limits_by_the_api(tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as svc, svc.client(None) as c:
        r = c.get("/dashboard/limits.json")
        assert r.status_code == 200
        limits = r.json()
        schema = svc.app.openapi()
    assert limits == url_limits(schema)
    assert set(limits) == set(SENT_AS)
    # every key is sent as some parameter of the API that declares a limit
    assert all(v["max_length"] is not None or v["patterns"] for v in limits.values()), limits
    # the tightest of the parameters a key is sent as: sink is 256 on /v1/reports, 128 on the
    # fleet's and the run reports' routes
    assert limits["sink"] == {"max_length": 128, "patterns": []}
    assert limits["capability"]["max_length"] == 256  # the page's own copy said 64
    assert limits["decode"]["max_length"] == 64
    assert limits["prefix"] == {"max_length": None, "patterns": ["^[0-9a-fA-F]{1,64}$"]}


def test_the_limits_follow_the_schema() -> None:
    def param(name: str, **string: object) -> dict[str, object]:
        return {"name": name, "schema": {"anyOf": [{"type": "string", **string}, {"type": "null"}]}}

    schema = {
        "paths": {
            "/a": {"get": {"parameters": [param("sink", maxLength=10), param("q", pattern="^x")]}},
            "/b": {"get": {"parameters": [param("sink", maxLength=7)]}},
            "/c": {"post": {"parameters": [param("sink", maxLength=1)]}},  # not a GET: not sent
        }
    }
    limits = url_limits(schema)
    assert limits["sink"] == limits["run_sink"] == {"max_length": 7, "patterns": []}
    assert limits["q"] == {"max_length": None, "patterns": ["^x"]}
    assert limits["decode"] == {"max_length": None, "patterns": []}
