"""The page's decodes reported to the service (issue 19, item 7; docs/page.md): off by default
(no request to /v1/run-reports); opted in, a decode is posted as ``wai-run-report/1`` with the
page's sink token and stored: an operator reads it back through the API, exactly the page's
reports, set and symbols digests. A sink name that is not the token's is the service's
``run_report_sink_mismatch`` on the page, and the page keeps its token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pagekit import open_page, screenshot, serve_service

from wai_dispatch.dispatch import Report
from wai_dispatch.service.settings import load
from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.report_store import ReportStore

SAMPLE = "bmshj2018-demo-q3.json"
SINK = "page-tests"  # the name pagekit.serve_service's sink token carries
CAPABILITY = "wai.neural.bmshj2018"
# The browser sinks' class: the default set of the sample's capability, at tier none.
POLICY = """format: wai-model-policy/1
classes:
  browser:
    sinks: [{sink}]
    tiers: [none]
    sets:
      - capability: {capability}
        digests: [{digest}]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[dict[str, str]]:
    data_dir: Path = tmp_path_factory.mktemp("runreport")
    store = ReportStore(load(data_dir=data_dir, warm=False).url)  # the store the service opens
    store.migrate()
    operator = bearer.create(store, "page-operator", bearer.Role.operator)
    admin = bearer.create(store, "page-admin", bearer.Role.admin)
    store.dispose()
    with serve_service(data_dir) as (url, _, token):
        sink = {"Authorization": f"Bearer {token}"}
        default = httpx.get(f"{url}sets/default/{CAPABILITY}", headers=sink, timeout=30)
        policy = POLICY.format(sink=SINK, capability=CAPABILITY, digest=default.json()["digest"])
        put = httpx.put(
            url.removesuffix("page/") + "v1/policy",
            content=policy,
            headers={"Authorization": f"Bearer {admin}"},
            timeout=30,
        )
        assert put.status_code == 200, put.text
        yield {"url": url, "token": token, "operator": operator}


def _posts(page: Any) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if "/v1/run-reports" in r.url else None)
    return seen


def test_off_by_default(site: dict[str, str], browser: Any) -> None:
    with browser([], token=site["token"]) as page:
        posts = _posts(page)
        open_page(page, site["url"])
        assert page.is_checked("#post-run-report") is False
        page.select_option("#sample", SAMPLE)
        result = page.evaluate("window.waiPage.decodeSample()")
        assert result["parts"] and "runReport" not in result, result
        assert posts == [] and page.inner_text("#run-report-status") == ""
        assert page.errors == []


def test_opted_in_the_run_report_is_stored(site: dict[str, str], browser: Any) -> None:
    with browser([], token=site["token"]) as page:
        posts = _posts(page)
        open_page(page, site["url"])
        page.check("#post-run-report")
        page.fill("#sink-name", SINK)
        page.select_option("#sample", SAMPLE)
        result = page.evaluate("window.waiPage.decodeSample()")
        posted = result["runReport"]
        assert posted["ok"] is True and posted["status"] == 200, posted
        run_id = posted["id"]
        assert run_id.startswith("page-") and len(posts) == 1
        verdict = posted["verdict"]
        assert verdict["run_report"] == run_id and verdict["sink"] == SINK
        assert verdict["replayed"] is False and len(verdict["decodes"]) == 1
        assert verdict["class"] == "browser" and verdict["accepted"] is True, verdict
        status = page.inner_text("#run-report-status")
        assert f"Run report {run_id} posted: accepted under policy version 1" in status, status
        assert page.get_attribute("#run-report-status", "data-state") == "done"
        screenshot(page, "run-report-posted")
        assert page.errors == []

    # The operator reads it back through the API: the page's reports, set and symbols digest.
    base = site["url"].removesuffix("page/")
    answer = httpx.get(
        f"{base}v1/run-reports/{run_id}",
        params={"sink": SINK},
        headers={"Authorization": f"Bearer {site['operator']}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    stored = answer.json()
    part = result["parts"][0]
    assert stored["run_report"] == {
        "format": "wai-run-report/1",
        "id": run_id,
        "sink": SINK,
        "decodes": [
            {
                "set_digest": part["set"],
                "symbols_digest": part["symbolsDigest"],
                "report": result["reports"][0],
            }
        ],
    }
    Report.from_json(stored["run_report"]["decodes"][0]["report"])
    assert stored["verdict"]["run_report"] == run_id
    assert stored["verdict"]["decodes"][0]["symbols_digest"] == part["symbolsDigest"]
    # and the operator's summary counts it
    summary = httpx.get(
        f"{base}v1/run-reports/summary",
        params={"sink": SINK},
        headers={"Authorization": f"Bearer {site['operator']}"},
        timeout=30,
    )
    assert summary.status_code == 200, summary.text
    assert summary.json()["classes"] == [  # its one decode, counted in its sink's class
        {
            "class": "browser",
            "runs_accepted": 1,
            "runs_refused": 0,
            "decodes": 1,
            "decodes_no_path": 0,
        }
    ]
    # and its decode is among the reports the dashboard lists
    items = httpx.get(
        f"{base}v1/reports",
        params={"limit": 500},
        headers={"Authorization": f"Bearer {site['operator']}"},
        timeout=30,
    ).json()["items"]
    mine = [r for r in items if r.get("run_report") == run_id]
    assert len(mine) == 1, items


def test_another_sinks_name_is_refused_and_the_token_kept(
    site: dict[str, str], browser: Any
) -> None:
    with browser([], token=site["token"]) as page:
        open_page(page, site["url"])
        page.check("#post-run-report")
        page.fill("#sink-name", "someone-else")
        page.select_option("#sample", SAMPLE)
        result = page.evaluate("window.waiPage.decodeSample()")
        posted = result["runReport"]
        assert posted["ok"] is False and posted["status"] == 403, posted
        assert posted["error"]["code"] == "run_report_sink_mismatch"
        status = page.inner_text("#run-report-status")
        assert "not posted: run_report_sink_mismatch" in status and "page-tests" in status
        assert page.get_attribute("#run-report-status", "data-state") == "error"
        assert page.evaluate("sessionStorage.getItem('wai-dispatch.token')") == site["token"]
        assert page.is_visible("main") and page.is_visible("#result")  # the decode still shows
        assert page.errors == []


def test_a_refusal_is_shown_in_the_error_style(site: dict[str, str], browser: Any) -> None:
    """One rule decides a status line's style from its outcome: a decode no offered path ran
    (decode_no_path: the replicate sample needs decode-equivalence, which no float path holds,
    and its capability's networks are not integer) and a run report the service refused (an
    int-synth decode: the class's policy names no int_synth set) look like errors, not
    successes."""
    with browser([], token=site["token"]) as page:
        open_page(page, site["url"])
        page.check("#post-run-report")
        page.fill("#sink-name", SINK)
        page.select_option("#sample", "bmshj2018-demo-q3-replicate.json")
        result = page.evaluate("window.waiPage.decodeSample()")
        assert result["decoded"] is False, result
        assert "decode_no_path" in page.inner_text("#status")
        assert page.get_attribute("#status", "data-state") == "error"
        error = page.evaluate("getComputedStyle(document.getElementById('status')).color")
        assert error == "rgb(179, 38, 30)"  # page.css's error colour, #b3261e
        screenshot(page, "decode-no-path")
        page.select_option("#sample", "int-synth-int8-units-demo-q3.json")
        result = page.evaluate("window.waiPage.decodeSample()")
        assert result["decoded"] is True, result
        posted = result["runReport"]
        assert posted["ok"] is True and posted["verdict"]["accepted"] is False, posted
        assert "refused" in page.inner_text("#run-report-status")
        assert page.get_attribute("#run-report-status", "data-state") == "error"
        assert page.errors == []
