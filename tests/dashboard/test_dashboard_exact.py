"""Is the exact tier holding, in a real browser (Chromium through Playwright) against the real
service on SQLite and on PostgreSQL: the exact-tier panel lists, per set and symbols digest, the
distinct RGB digests of the integer decodes; a seeded disagreement (one payload, two RGB digests)
is its first row, marked "DISAGREE", and every group and count shown is held to the stored rows,
grouped in SQL (not through the API). A float decode and a refusal are not listed."""

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

pytestmark = pytest.mark.slow
NOW = int(time.time() * 1000) - 60_000  # a minute ago: inside the page's default day
A = "ab" * 32
S1, S2 = "11" * 32, "22" * 32
X, Y = "e1" * 32, "f2" * 32
#: (sink, symbols digest, RGB digest (None: a sink's decode), tier)
DECODES = [
    ("kiosk-1", S1, X, "decode-equivalence"),
    ("kiosk-2", S1, X, "decode-equivalence"),
    ("kiosk-1", S2, X, "decode-equivalence"),
    ("kiosk-2", S2, Y, "decode-equivalence"),  # the disagreement
    ("archive-1", S2, None, "decode-equivalence"),  # a sink's: RGB not reported
    ("kiosk-1", S2, Y, "none"),  # a float decode: not the exact tier
]


def _rec(i: int, sink: str, symbols: str, rgb: str | None, tier: str) -> ReportRecord:
    exact = tier == "decode-equivalence"
    return report(
        i,
        sink,
        NOW + i,
        set_digest=A,
        symbols_digest=symbols,
        rgb_digest=rgb,
        needed=tier,
        path_ran="cpu/wai-ops/integer" if exact else "cpu/onnx-runtime/float",
        tier=tier,
        source="service" if rgb else "sink",
        request_digest=f"{i:064x}" if rgb else None,
    )


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def live(request: pytest.FixtureRequest, tmp_path: Path, browser: Any) -> Iterator[Any]:
    extra = {}
    if request.param == "postgresql":
        extra["database_url"] = request.getfixturevalue("postgres_url")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_svc, "PORTS", range(18280, 18300))  # this suite's ports
        with serve(tmp_path / "data", **extra) as running:
            running.service.report_store.insert(
                [_rec(i, *d) for i, d in enumerate(DECODES, start=1)]
            )
            yield running


def _expected(live: Any) -> list[tuple[str, int, int]]:
    """Per (set, symbols digest) of the exact tier: (verdict, distinct RGB digests, decodes),
    disagreeing first, counted from the stored rows in SQL."""
    with live.service.report_store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT symbols_digest, count(DISTINCT rgb_digest), count(*) FROM reports"
                " WHERE tier = 'decode-equivalence' AND outcome = 'decoded'"
                " GROUP BY set_digest, symbols_digest"
            )
        ).all()
    ordered = sorted(rows, key=lambda r: (-int(r[1]), str(r[0])))
    return [("DISAGREE" if int(n) > 1 else "agree", int(n), int(d)) for _, n, d in ordered]


def test_the_exact_tier_panel_flags_a_disagreement(live: Any) -> None:
    want = _expected(live)
    assert want == [("DISAGREE", 2, 3), ("agree", 1, 2)]  # the seeded disagreement first
    with browser_context(viewport={"width": 1440, "height": 900}) as context:
        page = context.new_page()
        page.goto(f"{live.url}/dashboard/")
        page.fill("#token", live.tokens["operator"])
        page.click("#login-form button[type=submit]")
        wait_until(page, "document.querySelector('#status').textContent.startsWith('updated')")
        assert page.inner_text("#exact-total") == f"{len(want)} payloads"
        rows = page.locator("#t-exact tbody tr")
        shown = []
        for i in range(rows.count()):
            cells = rows.nth(i).locator("td")
            verdict = cells.nth(0).inner_text().strip()
            shown.append((verdict.split(":")[0], int(cells.nth(4).inner_text())))
        assert shown == [(v, d) for v, _, d in want]
        first = rows.nth(0).locator("td")
        assert first.nth(0).inner_text().strip() == "DISAGREE: 2 RGB digests"
        assert "refused" in (first.nth(0).get_attribute("class") or "")  # red, at a glance
        assert first.nth(3).inner_text().strip() == f"{X[:16]}… ≠ {Y[:16]}…"
        assert int(first.nth(5).inner_text()) == 1  # the sink's decode: RGB not reported
        assert rows.nth(1).locator("td").nth(0).inner_text().strip() == "agree"
