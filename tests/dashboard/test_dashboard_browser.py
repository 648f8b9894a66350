"""The operator dashboard in a real browser (Debian's Chromium through Playwright) against the
real service (uvicorn, SQLite), with a fleet made through the public API only
(tools/dashboard_shots.py's ``populate``: six sinks, four in three classes and two in none, two
policy versions, run reports accepted and refused, one with 50 reasons, the service's own decodes,
malformed envelopes and a bad token). At 1440×900 and at 390 px wide, each operator question is
answered and agrees with the API: which sinks break policy (per sink, sorted, paged, with
totals), what share of decodes ran on the NPU, whether requests fail (request errors by code and
sink, auto-refresh, a stale marker when a refresh fails), which sets are in use (full digests, a
prefix finds one), drilling into a decode by keyboard (time, request id, duration, outcome, RGB
digest) and from a run report to its decodes; filters live in the URL; one time zone, named,
switchable; nothing is cut off or overflows sideways; the chart follows the window; axe-core
finds no serious or critical violation. Every request goes to the service's own origin; a
wrong-role, revoked or unknown token is sent back to login. Screenshots in out/browser-tests/."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import _svc
import pytest
from _svc import SAMPLE_JSON, serve
from pagekit import DASHBOARD_ARTIFACTS, browser_context, screenshot, wait_until

from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools.dashboard_shots import SINKS, VIEWPORTS, A, B, C, populate

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
WIDTHS = list(VIEWPORTS)  # "1440" (1440×900) and "390" (390×844)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    data = tmp_path_factory.mktemp("dash")
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    store.migrate()
    made = {name: bearer.create(store, name, bearer.Role.sink) for name in SINKS}
    made["revoked"] = bearer.create(store, "old-operator", bearer.Role.operator)
    bearer.revoke(store, "old-operator")
    store.dispose()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_svc, "PORTS", range(18230, 18250))  # this suite's ports
        with serve(data) as running:
            running.tokens.update(made)
            running.tokens["sink-a"] = running.tokens["sink"]
            running.fleet = populate(running.url, running.tokens, SAMPLE_JSON.read_bytes())
            # the request errors are written by a thread of their own (at most once a second):
            # what the fleet made is written before the questions are asked
            assert running.app.state.service.errors.flush()
            yield running


def _api(live: Any, path: str, **params: Any) -> Any:
    with live.client("operator") as c:
        answer = c.get(path, params=params)
        answer.raise_for_status()
        return answer.json()


def _text(page: Any, selector: str) -> str:
    return str(page.inner_text(selector))


def _updated(page: Any, before: int) -> None:
    """Wait for a load after ``before`` (performance marks: one per rendered load)."""
    wait_until(
        page,
        f"performance.getEntriesByName('dashboard-rendered').length > {before}"
        " && document.querySelector('#status').textContent.startsWith('updated')",
    )


def _marks(page: Any) -> int:
    return int(page.evaluate("performance.getEntriesByName('dashboard-rendered').length"))


def _apply(page: Any) -> None:
    n = _marks(page)
    page.click("#filters button[type=submit]")
    _updated(page, n)


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def _no_overflow(page: Any) -> list[str]:
    """Every card, table and the page itself: nothing wider than its box (cut off, or sideways)."""
    return list(
        page.evaluate("""() => {
      const bad = [];
      const d = document.documentElement;
      if (d.scrollWidth > window.innerWidth + 1) bad.push('page ' + d.scrollWidth);
      for (const n of document.querySelectorAll('article:not([hidden]), .table-wrap')) {
        if (n.offsetParent === null) continue;
        if (n.scrollWidth > n.clientWidth + 1) {
          bad.push((n.closest('article').querySelector('h2') || n).textContent.trim().slice(0, 40)
                   + ' ' + n.scrollWidth + '>' + n.clientWidth);
        }
      }
      return bad;
    }""")
    )


def _axe(page: Any) -> list[dict[str, Any]]:
    found = page.evaluate("""async () => {
      const r = await axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact,
        nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
    }""")
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_the_operator_questions(live: Any, width: str) -> None:
    size = VIEWPORTS[width]
    day = _api(live, "/v1/reports/summary", since_ms=0)
    sinks = _api(live, "/v1/fleet/sinks", limit=50)
    by_sink = {r["sink"]: r for r in sinks["items"]}
    # and sink-a (the service's own decodes) and sink-b: every sink a token knows is a row
    assert sinks["total"] == len(SINKS) + 2
    with browser_context(viewport=size, timezone_id="Asia/Kolkata") as context:
        context.add_init_script(path=str(AXE))  # an init script: no CSP applies to it
        page = context.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{live.url}/dashboard/")
        page.fill("#token", live.tokens["operator"])
        page.click("#login-form button[type=submit]")
        _updated(page, 0)
        assert _text(page, "#total") == f"{day['reports']} reports"
        assert page.locator("#chart-time canvas").count() >= 1

        # layout: nothing cut off or sideways; the chart fits its card; axe finds nothing serious
        assert _no_overflow(page) == []
        chart = page.evaluate("document.querySelector('#chart-time .uplot').offsetWidth")
        box = page.evaluate("document.querySelector('#chart-time').clientWidth")
        assert abs(chart - box) <= 2, (chart, box)
        assert _axe(page) == []
        screenshot(page, f"dashboard-{width}", DASHBOARD_ARTIFACTS)

        # which sinks break policy: per sink, unclassified named, sorted, totals and paging
        assert _text(page, "#sinks-total") == f"{sinks['total']} sinks"
        rows = page.locator("#t-sinks tbody tr")
        assert rows.count() == sinks["total"]
        kiosk2 = by_sink["kiosk-2"]
        assert (kiosk2["runs_accepted"], kiosk2["runs_refused"]) == (1, 11)
        text = _text(page, "#t-sinks tbody")
        assert "1 / 11" in text and "unclassified" in text
        n = _marks(page)
        page.select_option("#sink-sort", "runs_refused:desc")
        _updated(page, n)
        assert _text(page, "#t-sinks tbody tr:first-child td:first-child").endswith("kiosk-2")
        assert _query(page)["sort"] == ["runs_refused:desc"]
        runs = _api(live, "/v1/run-reports/summary")
        assert runs["refused_total"] == len(live.fleet["refused_runs"]) == 12
        assert _text(page, "#runs-total") == "12 refused"
        assert _text(page, "#runs-pager .pager-text") == "1–10 of 12"
        n = _marks(page)
        page.click("#runs-pager button:has-text('next')")
        _updated(page, n)
        assert _text(page, "#runs-pager .pager-text") == "11–12 of 12"
        assert page.locator("#t-runs tbody tr").count() == 2
        n = _marks(page)
        page.click("#runs-pager button:has-text('previous')")
        _updated(page, n)

        # what share of decodes ran on the NPU, beside the share of operations
        npu = page.locator("#t-placement tbody tr", has_text="npu")
        share = f"{100 * day['decode_share']['npu']:.1f} %"
        assert share in npu.inner_text() and day["decode_share"]["npu"] != day["placement"]["npu"]

        # did anything start failing in the last hour: request errors by code and by sink
        page.select_option("#f-range", "3600")
        _apply(page)
        assert _query(page)["range"] == ["3600"]
        errors = _api(live, "/v1/request-errors")  # now: the browser's own 404s count too
        assert _text(page, "#errors-total") == f"{errors['total']} requests"
        codes = _text(page, "#t-error-codes tbody")
        for row in errors["by_code"]:
            assert row["code"] in codes
        assert by_sink["kiosk-1"]["request_errors"] == 3
        kiosk1 = page.locator("#t-sinks tbody tr", has_text="kiosk-1")
        assert "3" in kiosk1.locator("td").nth(4).inner_text()
        assert "sink kiosk-1" in _text(page, "#t-errors tbody")
        assert _text(page, "#refresh-line") == "auto-refresh every 30 s"
        page.route("**/v1/reports/summary*", lambda route: route.abort())
        page.click("#filters button[type=submit]")
        wait_until(page, "!document.querySelector('#stale').hidden")
        assert "Stale" in _text(page, "#stale")
        assert page.evaluate("document.body.classList.contains('stale')")
        assert _text(page, "#total") == f"{day['reports']} reports"  # the data stays, marked
        page.unroute("**/v1/reports/summary*")
        _apply(page)
        assert page.is_hidden("#stale")

        # which sets are in use: full digests, copy, a prefix finds the set
        sets = _text(page, "#t-sets tbody")
        assert A in sets and C in sets
        listed = _api(live, "/v1/fleet/sets")["items"]
        versions = {r["set"]: r["version"] for r in listed if r["version"]}
        assert versions and all(f"version {v}" in sets for v in versions.values())  # by the name
        assert page.locator("#t-sets button.copy").count() >= 2
        page.fill("#f-set", C[:8])
        _apply(page)
        assert page.input_value("#f-set") == C and _query(page)["set"] == [C]
        assert _text(page, "#decodes-total") == "4 reports"  # archive-1's four decodes

        # filters in the URL: a reload shows the same view
        n = _marks(page)
        page.reload()
        _updated(page, 0)
        assert page.input_value("#f-set") == C and page.input_value("#f-range") == "3600"
        assert _text(page, "#decodes-total") == "4 reports"
        del n

        # drill into a decode by keyboard: time, request id, duration, outcome, RGB digest
        page.fill("#f-set", "")
        _apply(page)
        first = page.locator("#t-decodes tbody tr").first
        report_id = first.get_attribute("data-id")
        first.locator("button").focus()
        page.keyboard.press("Enter")
        page.wait_for_selector("#detail:not([hidden])")
        stored = _api(live, f"/v1/reports/{report_id}")
        assert stored["source"] == "service" and stored["rgb_digest"]
        assert _text(page, "#d-id") == report_id
        assert _text(page, "#d-request") == stored["request_id"]
        assert _text(page, "#d-rgb") == stored["rgb_digest"]
        assert _text(page, "#d-outcome").startswith(stored["outcome"])
        assert _text(page, "#d-duration") == f"{stored['duration_ms']} ms"
        assert json.loads(_text(page, "#d-report")) == stored["report"]
        assert _query(page)["decode"] == [report_id]

        # one time zone, named, switchable: UTC, then the browser's (UTC+05:30 here)
        utc = _text(page, "#d-time")
        assert utc.endswith("(UTC)")
        n = _marks(page)
        page.select_option("#f-tz", "local")
        _updated(page, n)
        head = _text(page, "#t-decodes thead th:first-child")
        assert head == "time (local, UTC+05:30)"
        assert _query(page)["tz"] == ["local"]

        # a refused run report: every reason, each decode opened, a link to its stored decodes
        big = page.locator("#t-runs tbody tr", has_text=live.fleet["big_run"])
        assert "and 30 more reasons" in big.inner_text()
        big.locator("button").click()
        page.wait_for_selector("#run-detail:not([hidden])")
        assert page.locator("#t-run-decodes tbody tr").count() == 50
        assert page.locator("#t-run-decodes .reasons li").count() == 50
        page.locator("#t-run-decodes tbody tr").nth(3).locator("button").press("Enter")
        page.wait_for_selector("#r-decode:not([hidden])")
        sent = json.loads(_text(page, "#r-decode"))
        assert sent["set_digest"] == B and sent["report"]["ran"]["unit"] == "cpu"
        page.locator("#t-runs tbody tr", has_text="k2-bad-9").locator("button").click()
        wait_until(page, "document.querySelector('#r-id').textContent === 'k2-bad-9'")
        n = _marks(page)
        page.click("#r-decodes")  # its one accepted decode (set A) is stored
        _updated(page, n)
        assert _text(page, "#decodes-total") == "1 reports"
        assert _query(page)["run"] == ["k2-bad-9"]
        assert _axe(page) == []
        assert _no_overflow(page) == []
        screenshot(page, f"dashboard-{width}-drilldown", DASHBOARD_ARTIFACTS)

        # the chart follows the window
        other = VIEWPORTS[WIDTHS[1 - WIDTHS.index(width)]]
        page.set_viewport_size(other)
        wait_until(
            page,
            "Math.abs(document.querySelector('#chart-time .uplot').offsetWidth"
            " - document.querySelector('#chart-time').clientWidth) <= 2",
        )
    origins = {f"{urlsplit(u).scheme}://{urlsplit(u).netloc}" for u in requests}
    assert origins == {live.url}, f"requests outside the service: {sorted(origins)}"
    assert all(not re.search(r"token|Bearer", u) for u in requests)  # never in a URL


def test_a_refused_token_is_sent_back_to_login(live: Any) -> None:
    with browser_context() as context:
        page = context.new_page()
        for role, shown in (("sink", "403"), ("revoked", "401"), (None, "401")):
            token = live.tokens[role] if role else "never-issued"
            page.goto(f"{live.url}/dashboard/")
            page.fill("#token", token)
            page.click("#login-form button[type=submit]")
            wait_until(page, "document.querySelector('#login-message').textContent !== ''")
            assert shown in _text(page, "#login-message"), role
            assert page.is_visible("#login-view") and page.is_hidden("#dash-view")
            assert page.evaluate("sessionStorage.getItem('wai-dispatch.token')") is None
        screenshot(page, "login-unknown", DASHBOARD_ARTIFACTS)


def _logged_in(context: Any, live: Any) -> Any:
    page = context.new_page()
    page.goto(f"{live.url}/dashboard/")
    page.fill("#token", live.tokens["operator"])
    page.click("#login-form button[type=submit]")
    _updated(page, 0)
    return page


def test_escape_closes_whichever_panel_is_open(live: Any) -> None:
    """One handler for every panel: a run report closes on Escape as a decode does; with both
    open, the one holding the focus closes first."""
    with browser_context() as context:
        page = _logged_in(context, live)
        page.locator("#t-runs tbody tr").first.locator("button").click()
        page.wait_for_selector("#run-detail:not([hidden])")
        page.keyboard.press("Escape")
        assert page.is_hidden("#run-detail")
        page.locator("#t-decodes tbody tr").first.locator("button").click()
        page.wait_for_selector("#detail:not([hidden])")
        page.keyboard.press("Escape")
        assert page.is_hidden("#detail")
        page.locator("#t-decodes tbody tr").first.locator("button").click()
        page.wait_for_selector("#detail:not([hidden])")
        page.locator("#t-runs tbody tr").first.locator("button").click()
        page.wait_for_selector("#run-detail:not([hidden])")
        page.keyboard.press("Escape")
        assert page.is_hidden("#run-detail") and page.is_visible("#detail")
        page.keyboard.press("Escape")
        assert page.is_hidden("#detail")


def test_the_class_menu_keeps_every_class_after_one_is_chosen(live: Any) -> None:
    """The menu is built from the unfiltered list: choosing a class leaves the others on offer."""
    summary = _api(live, "/v1/run-reports/summary")
    classes = [c["class"] for c in summary["classes"] if c["class"] is not None]
    assert len(classes) >= 2
    with browser_context() as context:
        page = _logged_in(context, live)
        menu = "#f-class option"
        before = page.eval_on_selector_all(menu, "os => os.map((o) => o.value)")
        assert before[0] == "" and set(classes) <= set(before)
        for chosen in (classes[-1], classes[0]):
            n = _marks(page)
            page.select_option("#f-class", chosen)
            _updated(page, n)
            assert _query(page)["class"] == [chosen]
            assert page.eval_on_selector_all(menu, "os => os.map((o) => o.value)") == before
            assert page.input_value("#f-class") == chosen
