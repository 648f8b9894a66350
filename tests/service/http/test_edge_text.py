"""Issue 29, item 1: one answer whatever the store. Every route's query and path parameters are
checked at the edge (service/http/edge.py): a NUL or another control character, bytes that are
not UTF-8, or an over-long value is a 422 ``request_invalid`` naming the parameter, on SQLite and
on PostgreSQL alike (PostgreSQL refuses a NUL in text that SQLite keeps: it was a 500 there).

The routes are enumerated from the app (``iter_route_contexts(app.routes)``), so a route or a
parameter added later is covered without touching this file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _svc import InProcess, in_process, pg_database
from fastapi.routing import APIRoute, iter_route_contexts

from wai_dispatch.service.http.edge import MAX_TEXT, text_problem

_PARAM = re.compile(r"\{([^}:]+)(?::[^}]+)?\}")
#: Values no store may be handed: C0, DEL, C1 controls, over-long text (raw query forms).
HOSTILE = {
    "nul": "a%00b",
    "soh": "%01",
    "newline": "x%0Ay",
    "escape": "%1B%5B31m",
    "del": "%7F",
    "c1": "%C2%85",
    "not-utf8": "%FF%FE",
    "surrogate": "%ED%A0%80",
    "long": "a" * (MAX_TEXT + 1),
}


def _database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    with pg_database(request.getfixturevalue("postgres")) as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    for url in _database(request):
        extra = {} if url is None else {"database_url": url}
        with in_process(tmp_path_factory.mktemp("edge") / "data", **extra) as running:
            yield running


def _walk(dependant: Any) -> Iterator[Any]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _walk(sub)


def _routes(app: Any) -> list[tuple[str, str, list[str], list[str]]]:
    """(method, path template, path parameters, query parameters) of every API route."""
    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        parts = list(_walk(route.dependant))
        paths = sorted({p.name for d in parts for p in d.path_params})
        queries = sorted({p.alias for d in parts for p in d.query_params})
        for method in sorted(context.methods or {"GET"}):
            found.append((method, context.path, paths, queries))
    return found


def _url(template: str, hostile: str | None = None, value: str = "") -> str:
    def fill(m: re.Match[str]) -> str:
        if m.group(1) == hostile:
            return value
        return "0" * 64 if m.group(1) == "digest" else "x"

    return _PARAM.sub(fill, template)


@pytest.mark.slow
def test_every_text_parameter_of_every_route_refuses_hostile_text(live: InProcess) -> None:
    routes = _routes(live.app)
    assert len(routes) >= 30
    params = sum(len(p) + len(q) + 1 for _, _, p, q in routes)  # +1: an undeclared query name
    sent = 0
    with live.client("admin") as client:
        for method, template, paths, queries in routes:
            targets = [("path", name) for name in paths] + [("query", name) for name in queries]
            targets.append(("query", "undeclared"))
            for kind, name in targets:
                for label, value in HOSTILE.items():
                    if kind == "path":
                        url = _url(template, name, value)
                    else:
                        url = f"{_url(template)}?{quote(name)}={value}"
                    r = client.request(method, url)
                    sent += 1
                    what = f"{method} {url} ({label}) -> {r.status_code}: {r.text[:200]}"
                    assert r.status_code == 422, what
                    error = r.json()["error"]
                    assert error["code"] == "request_invalid", what
                    where = error["message"].split(":", 1)[0]
                    if kind == "query" or label not in ("not-utf8", "surrogate"):
                        assert where == f"{kind}.{name}", what
                    else:  # bytes that are not UTF-8 in the path: the whole path is refused
                        assert where == "path", what
    assert sent == params * len(HOSTILE)


def test_a_hostile_query_name_is_refused_by_its_escaped_name(live: InProcess) -> None:
    with live.client("operator") as client:
        r = client.get("/v1/reports?a%00b=1")
    assert r.status_code == 422
    assert r.json()["error"]["message"] == ("query name 'a\\x00b': a control character (U+0000)")


def test_plain_text_passes_the_edge(live: InProcess) -> None:
    """Unicode text that is not a control (accents, emoji, U+FFFD itself, quotes) reaches the
    route, and the route answers as it would."""
    with live.client("operator") as client:
        for value in ("café", "😀", "\ufffd", "'; DROP TABLE reports; --", "a" * MAX_TEXT):
            r = client.get("/v1/request-errors", params={"sink": value[:128]})
            assert r.status_code == 200, (value, r.text)
            r = client.get("/v1/reports", params={"capability": value[:256]})
            assert r.status_code == 200, (value, r.text)


def test_text_problem_names_the_class() -> None:
    assert text_problem("plain text, é, 😀") is None
    assert text_problem("a\x00") == "a control character (U+0000)"
    assert text_problem("\x85") == "a control character (U+0085)"
    assert text_problem("\udcff") == "bytes that are not UTF-8 text (or a lone surrogate)"
    assert text_problem("a" * (MAX_TEXT + 1)) == f"longer than {MAX_TEXT} characters"
    assert text_problem("a" * MAX_TEXT) is None


#: One fixed hostile request set: every answer's (status, code) must be the same on both stores.
SAME_ANSWERS = [
    "/v1/reports?total=true&capability=%00",
    "/v1/reports?sink=%00&tier=x",
    "/v1/reports?request_id=%00",
    "/v1/reports?capability=%E2%80%AE%F0%9F%98%80",
    "/v1/reports?capability=%27%3B--",
    "/v1/reports?cursor=%00",
    "/v1/reports?cursor=cjE",
    "/v1/reports/summary?reason=%00",
    "/v1/reports/x%00y",
    "/v1/reports/%FF",
    "/v1/reports/" + "a" * 64,
    "/v1/run-reports/x%00y",
    "/v1/run-reports/summary?sink=%00",
    "/v1/run-reports/summary?sink_class=%01",
    "/v1/fleet/sinks?q=%00",
    "/v1/fleet/sinks?q=%25_%5C",
    "/v1/fleet/sinks?sink_class=nope",
    "/v1/fleet/sets?prefix=%00",
    "/v1/fleet/sets?set=%00",
    "/v1/request-errors?code=%00",
    "/v1/request-errors?sink=%00",
    "/v1/request-errors?sink=%C3%A9",
    "/v1/sets/%00",
    "/v1/policy?version=%00",
    "/page/sets/default/%00",
    "/page/samples/%00",
]


def _answers(root: Path, url: str | None) -> list[tuple[int, str | None]]:
    extra = {} if url is None else {"database_url": url}
    with in_process(root, **extra) as running, running.client("operator") as client:
        out = []
        for path in SAME_ANSWERS:
            r = client.get(path)
            code = r.json().get("error", {}).get("code") if r.status_code >= 400 else None
            assert r.status_code < 500, (path, r.status_code, r.text[:300])
            out.append((r.status_code, code))
        return out


def test_the_two_stores_answer_the_same_hostile_requests_alike(
    tmp_path: Path, postgres: str
) -> None:
    on_sqlite = _answers(tmp_path / "sqlite", None)
    with pg_database(postgres) as url:
        on_postgres = _answers(tmp_path / "postgres", url)
    differ = [
        (path, a, b)
        for path, a, b in zip(SAME_ANSWERS, on_sqlite, on_postgres, strict=True)
        if a != b
    ]
    assert differ == []
    assert on_sqlite[0] == (422, "request_invalid")
