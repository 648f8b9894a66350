"""The operator dashboard in a real browser (Debian's Chromium through Playwright) against the
real service (uvicorn, SQLite) with seeded reports and run reports: it renders (screenshots in
out/browser-tests/), filters and the drill-down change what is shown and agree with the API, a
wrong-role, revoked or unknown token is sent back to login, and every request the page makes
goes to the service's own origin."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import _svc
import pytest
from _svc import serve
from pagekit import DASHBOARD_ARTIFACTS, browser_context, screenshot, wait_until

from wai_dispatch.service.governance import parse_run_report
from wai_dispatch.service.store import tokens
from wai_dispatch.service.store.db import ReportStore
from wai_dispatch.service.store.policies import PolicyStore, submit
from wai_dispatch.tools.seed_reports import seed

A = "a" * 64
POLICY = f"""format: wai-model-policy/1
classes:
  kiosk:
    sinks: [sink-000, sink-001]
    tiers: [none]
    sets: [{{capability: wai.neural.bmshj2018, digests: [{A}]}}]
  archive:
    sinks: [sink-002]
    tiers: [decode-equivalence]
    sets: [{{digest: {"c" * 64}}}]
"""
REPORT = {
    "kind": "wai-neural-dispatch/1",
    "capability": "wai.neural.bmshj2018",
    "needed": "none",
    "ran": {"unit": "npu", "backend": "model-runtime", "arithmetic": "float", "tier": "none",
            "placement": {"npu": 21, "gpu": 0, "cpu": 0, "unknown": 0}},
    "refused": [],
}  # fmt: skip


def _run(run_id: str, sink: str, digest: str) -> Any:
    decode = {"set_digest": digest, "symbols_digest": "4" * 64, "report": REPORT}
    obj = {"format": "wai-run-report/1", "id": run_id, "sink": sink, "decodes": [decode]}
    return parse_run_report(obj), json.dumps(obj).encode()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    data = tmp_path_factory.mktemp("dash")
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    store.migrate()
    seed(store, 1500, sinks=6, days=0.5)  # every report inside the dashboard's last 24 hours
    policies = PolicyStore(store)
    policies.set(POLICY, by="ana")
    for i, (sink, digest) in enumerate([("sink-000", A), ("sink-001", "b" * 64), ("sink-002", A)]):
        run, body = _run(f"run-{i}", sink, digest)
        submit(store, policies, run, body, sink=sink)
    revoked = tokens.create(store, "old-operator", tokens.Role.operator)
    tokens.revoke(store, "old-operator")
    store.dispose()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_svc, "PORTS", range(18230, 18250))  # this suite's ports
        with serve(data) as running:
            running.tokens["revoked"] = revoked
            yield running


def _api(live: Any, path: str, **params: Any) -> Any:
    with live.client("operator") as c:
        answer = c.get(path, params=params)
        answer.raise_for_status()
        return answer.json()


def _open(page: Any, live: Any, token: str) -> None:
    page.goto(f"{live.url}/dashboard/")
    page.fill("#token", token)
    page.click("#login-form button[type=submit]")


def _loaded(page: Any, total: int) -> None:
    wait_until(page, f"document.querySelector('#total').textContent === '{total} reports'")


@pytest.mark.slow
def test_the_dashboard_renders_filters_and_drills_down(live: Any) -> None:
    since = int(time.time() * 1000) - 86_400_000
    everything = _api(live, "/v1/reports/summary", since_ms=since)
    one_sink = _api(live, "/v1/reports/summary", since_ms=since, sink="sink-001")
    kiosk = _api(live, "/v1/reports/summary", since_ms=since, sink_class="kiosk")
    assert everything["reports"] > kiosk["reports"] > one_sink["reports"] > 0
    with browser_context() as browser:
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        _open(page, live, live.tokens["operator"])
        _loaded(page, everything["reports"])
        assert page.locator("#chart-time canvas").count() >= 1  # uPlot drew the series
        paths = page.inner_text("#t-paths tbody")
        assert "npu/model-runtime/float" in paths and "cpu/wai-ops/integer" in paths
        refusals = page.inner_text("#t-refusals tbody")
        for code in everything["refusals"]:
            assert code in refusals
        assert "npu" in page.inner_text("#t-placement tbody")
        classes = page.inner_text("#t-classes tbody")
        assert "kiosk" in classes and "archive" in classes
        runs = page.inner_text("#t-runs tbody")
        assert "run-1" in runs and "set_not_allowed" in runs  # sink-001 ran a set not allowed
        assert "run-2" in runs and "tier_not_allowed" in runs
        assert "run-0" not in runs  # accepted
        assert "policy v1, set by ana" in page.inner_text("#policy-line")
        screenshot(page, "dashboard", DASHBOARD_ARTIFACTS)

        page.fill("#f-sink", "sink-001")
        page.click("#filters button[type=submit]")
        _loaded(page, one_sink["reports"])
        cells = page.locator("#t-decodes tbody td:nth-child(2)").all_inner_texts()
        sinks = {t.strip() for t in cells}
        assert sinks == {"sink-001"}
        screenshot(page, "dashboard-one-sink", DASHBOARD_ARTIFACTS)

        page.fill("#f-sink", "")
        page.select_option("#f-class", "kiosk")  # a change applies at once
        _loaded(page, kiosk["reports"])
        assert "run-2" not in page.inner_text("#t-runs tbody")  # archive's run report hidden

        row = page.locator("#t-decodes tbody tr").first
        report_id = row.get_attribute("data-id")
        row.click()
        page.wait_for_selector("#detail:not([hidden])")
        stored = _api(live, f"/v1/reports/{report_id}")
        assert page.inner_text("#d-id") == report_id
        assert page.inner_text("#d-set") == stored["set"]
        assert page.inner_text("#d-symbols") == stored["symbols_digest"]
        assert json.loads(page.inner_text("#d-report")) == stored["report"]
        screenshot(page, "dashboard-drilldown", DASHBOARD_ARTIFACTS)
    origins = {f"{urlsplit(u).scheme}://{urlsplit(u).netloc}" for u in requests}
    assert origins == {live.url}, f"requests outside the service: {sorted(origins)}"
    assert any("/v1/run-reports/summary" in u for u in requests)


@pytest.mark.parametrize(
    ("role", "shown"),
    [("sink", "403"), ("revoked", "401"), (None, "401")],
    ids=["wrong-role", "revoked", "unknown"],
)
def test_a_refused_token_is_sent_back_to_login(live: Any, role: str | None, shown: str) -> None:
    token = live.tokens[role] if role else "never-issued"
    with browser_context() as browser:
        page = browser.new_page()
        _open(page, live, token)
        wait_until(page, "document.querySelector('#login-message').textContent !== ''")
        assert shown in page.inner_text("#login-message")
        assert page.is_visible("#login-view") and page.is_hidden("#dash-view")
        assert page.evaluate("sessionStorage.getItem('wai-dispatch.token')") is None
        screenshot(page, f"login-{role or 'unknown'}", DASHBOARD_ARTIFACTS)
