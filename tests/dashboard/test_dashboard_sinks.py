"""Which sinks decoded nothing, in a real browser (Chromium through Playwright) against the real
service on SQLite and on PostgreSQL: every known sink is a row of the sinks panel (the ones only a
token or the policy knows, with zero reports, included), sorted by reports fewest first and most
first, and the "decoded nothing" filter keeps exactly the sinks none of whose reports decoded;
every number shown is checked against the stored rows, counted in SQL (not through the API)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import _svc
import pytest
from _reports import report
from _svc import serve
from pagekit import browser_context, wait_until
from sqlalchemy import text

from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.tools.dashboard_shots import policy

pytestmark = pytest.mark.slow
NOW = int(time.time() * 1000) - 60_000  # a minute ago: inside the page's default day
#: sink → outcomes of its reports ("d": decoded, "r": refused)
REPORTS = {"busy": "ddr", "steady": "d", "refusing": "rr", "once": "r"}
POLICY_SINKS = {"kiosk-1", "kiosk-2", "archive-1"}  # policy(1)'s: no reports


def _rec(i: int, sink: str, outcome: str) -> ReportRecord:
    return report(i, sink, NOW + i, ran=outcome == "d")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def live(request: pytest.FixtureRequest, tmp_path: Path, browser: Any) -> Iterator[Any]:
    extra = {}
    if request.param == "postgresql":
        extra["database_url"] = request.getfixturevalue("postgres_url")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_svc, "PORTS", range(18250, 18270))  # this suite's ports
        with serve(tmp_path / "data", **extra) as running:
            store = running.service.report_store
            bearer.create(store, "quiet-token", bearer.Role.sink)  # only its token knows it
            records = [
                _rec(10 * n + k, sink, o)
                for n, (sink, outcomes) in enumerate(REPORTS.items())
                for k, o in enumerate(outcomes)
            ]
            store.insert(records)
            with running.client("admin") as c:
                put = c.put(
                    "/v1/policy", content=policy(1), headers={"Content-Type": "application/yaml"}
                )
                put.raise_for_status()
            yield running


def _expected(live: Any) -> dict[str, tuple[int, int]]:
    """Per known sink: (reports, decoded), counted from the stored rows in SQL."""
    with live.service.report_store.engine.connect() as conn:
        counted = conn.execute(
            text(
                "SELECT sink, count(*), sum(CASE WHEN outcome = 'decoded' THEN 1 ELSE 0 END)"
                " FROM reports WHERE created_ms >= :since GROUP BY sink"
            ),
            {"since": NOW - 3_600_000},
        ).all()
        tokens = conn.execute(
            text("SELECT name FROM tokens WHERE role = 'sink' AND revoked_ms IS NULL")
        ).scalars()
        out = {str(s): (0, 0) for s in [*tokens, *POLICY_SINKS]}
    out.update({str(s): (int(n), int(d)) for s, n, d in counted})
    return out


def _shown(page: Any) -> list[tuple[str, int]]:
    rows = page.locator("#t-sinks tbody tr")
    return [
        (
            rows.nth(i).locator("td").nth(0).inner_text().strip(),
            int(rows.nth(i).locator("td").nth(2).inner_text().strip()),
        )
        for i in range(rows.count())
    ]


def _reload(page: Any, action: Any) -> None:
    n = page.evaluate("performance.getEntriesByName('dashboard-rendered').length")
    action()
    wait_until(
        page,
        f"performance.getEntriesByName('dashboard-rendered').length > {n}"
        " && document.querySelector('#status').textContent.startsWith('updated')",
    )


def test_the_sinks_that_decoded_nothing(live: Any) -> None:
    want = _expected(live)
    assert {"quiet-token", "sink-a", "sink-b", *POLICY_SINKS} <= set(want)  # zero-report sinks
    fewest = sorted(((s, n) for s, (n, _) in want.items()), key=lambda r: (r[1], r[0]))
    most = sorted(((s, n) for s, (n, _) in want.items()), key=lambda r: (-r[1], r[0]))
    nothing = [(s, n) for s, n in fewest if want[s][1] == 0]
    assert [s for s, _ in nothing][-2:] == ["once", "refusing"]  # reports, none decoded
    assert len(want) <= 20  # one page of the panel
    with browser_context(viewport={"width": 1440, "height": 900}) as context:
        page = context.new_page()
        page.goto(f"{live.url}/dashboard/")
        page.fill("#token", live.tokens["operator"])
        _reload(page, lambda: page.click("#login-form button[type=submit]"))
        assert _text_of(page) == f"{len(want)} sinks"
        _reload(page, lambda: page.select_option("#sink-sort", "reports"))
        assert _shown(page) == fewest
        _reload(page, lambda: page.select_option("#sink-sort", "reports:desc"))
        assert _shown(page) == most
        _reload(page, lambda: page.check("#sink-nothing"))
        assert _shown(page) == sorted(nothing, key=lambda r: (-r[1], r[0]))
        assert _text_of(page) == f"{len(nothing)} sinks"
        query = parse_qs(urlsplit(page.url).query)
        assert (query["nothing"], query["sort"]) == (["1"], ["reports:desc"])
        page.reload()  # the filter lives in the URL
        wait_until(page, "document.querySelector('#status').textContent.startsWith('updated')")
        assert page.is_checked("#sink-nothing") and _shown(page)[-1] == ("sink-b", 0)


def _text_of(page: Any) -> str:
    return str(page.inner_text("#sinks-total"))
