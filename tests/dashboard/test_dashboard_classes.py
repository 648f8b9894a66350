"""Decodes per sink class, in a real browser (Chromium through Playwright) against the real
service on SQLite and on PostgreSQL: the class panel's decodes and no-path decodes, per class
of the policy in force and "unclassified" (sinks no class names), are held to the stored rows
counted in SQL (not through the API): a decode is one request's reports (its fallback's
included) or one decode of a run report, so a decode with its fallback tried counts once, and
a decode no path ran is one none of whose reports decoded. A class filter keeps its row alone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _svc
import pytest
from _reports import report
from _svc import serve
from pagekit import browser_context, wait_until
from sqlalchemy import text

from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.tools.dashboard_shots import policy

pytestmark = pytest.mark.slow
NOW = int(time.time() * 1000) - 60_000  # a minute ago: inside the page's default day
#: policy(1)'s classes
CLASSES = {"kiosk-1": "kiosk", "kiosk-2": "kiosk", "archive-1": "archive"}
#: (sink, reports of one decode: "d" decoded, "r" refused; a second letter: its fallback;
#: "s": a sink's decode from a run report)
DECODES = [
    ("kiosk-1", "d"),
    ("kiosk-1", "rd"),  # the fallback decoded: one decode, two reports
    ("kiosk-2", "rr"),  # neither: one decode no path ran
    ("kiosk-2", "sd"),
    ("archive-1", "r"),
    ("archive-1", "sd"),
    ("lone-1", "d"),  # no class names these two: unclassified
    ("lone-1", "rd"),
    ("lone-2", "rr"),
    ("lone-2", "sr"),
]


def _records() -> list[ReportRecord]:
    out = []
    for d, (sink, kinds) in enumerate(DECODES):
        sink_decode = kinds[0] == "s"
        for ordinal, kind in enumerate(kinds[1:] if sink_decode else kinds):
            i = len(out) + 1
            out.append(
                report(
                    i,
                    sink,
                    NOW + i,
                    ran=kind == "d",
                    request_id=f"req-{d}",
                    role="primary" if ordinal == 0 else "fallback",
                    ordinal=ordinal,
                    source="sink" if sink_decode else "service",
                    run_report=f"run-{d}" if sink_decode else None,
                )
            )
    return out


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def live(request: pytest.FixtureRequest, tmp_path: Path, browser: Any) -> Iterator[Any]:
    extra = {}
    if request.param == "postgresql":
        extra["database_url"] = request.getfixturevalue("postgres_url")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_svc, "PORTS", range(18300, 18320))  # this suite's ports
        with serve(tmp_path / "data", **extra) as running:
            running.service.report_store.insert(_records())
            with running.client("admin") as c:
                put = c.put(
                    "/v1/policy", content=policy(1), headers={"Content-Type": "application/yaml"}
                )
                put.raise_for_status()
            yield running


def _expected(live: Any) -> dict[str, tuple[int, int]]:
    """Per class ("unclassified": no class names the sink): decodes and those no path ran,
    counted from the stored rows in SQL: one decode per (sink, request id), its reports'
    outcomes together."""
    with live.service.report_store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT sink, max(CASE WHEN outcome = 'decoded' THEN 1 ELSE 0 END) FROM reports"
                " WHERE created_ms >= :since GROUP BY sink, request_id"
            ),
            {"since": NOW - 3_600_000},
        ).all()
        reports = conn.execute(text("SELECT count(*) FROM reports")).scalar_one()
    out: dict[str, list[int]] = {}
    for sink, ran in rows:
        slot = out.setdefault(CLASSES.get(str(sink), "unclassified"), [0, 0])
        slot[0] += 1
        slot[1] += 1 - int(ran)
    assert int(reports) > sum(n for n, _ in out.values())  # reports are not decodes
    return {k: (n, no) for k, (n, no) in out.items()}


def _shown(page: Any) -> dict[str, tuple[int, int]]:
    rows = page.locator("#t-classes tbody tr")
    out = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        name = cells.nth(0).inner_text().strip()
        out[name] = (int(cells.nth(1).inner_text()), int(cells.nth(2).inner_text()))
    return out


def _updated(page: Any) -> None:
    wait_until(page, "document.querySelector('#status').textContent.startsWith('updated')")


def test_the_class_panel_counts_decodes_unclassified_included(live: Any) -> None:
    want = _expected(live)
    assert want == {"kiosk": (4, 1), "archive": (2, 1), "unclassified": (4, 2)}
    with browser_context(viewport={"width": 1440, "height": 900}) as context:
        page = context.new_page()
        page.goto(f"{live.url}/dashboard/")
        page.fill("#token", live.tokens["operator"])
        page.click("#login-form button[type=submit]")
        _updated(page)
        assert _shown(page) == want
        n = page.evaluate("performance.getEntriesByName('dashboard-rendered').length")
        page.select_option("#f-class", "kiosk")
        wait_until(page, f"performance.getEntriesByName('dashboard-rendered').length > {n}")
        _updated(page)
        assert _shown(page) == {"kiosk": want["kiosk"]}
