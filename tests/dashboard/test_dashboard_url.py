"""A shared dashboard URL with one value the API refuses (a sort, a range, a set prefix, a
decode id that is none, a time the service refuses) in a real browser (Debian's Chromium)
against the real service: that one value is dropped with a notice naming it, the rest of the
view loads (every panel drawn, not "Nothing could be loaded"), and the URL no longer holds it.
The last case passes the page's own checks and is refused by the API (a 422): the page drops it
and loads again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import _svc
import pytest
from _svc import serve
from pagekit import DASHBOARD_ARTIFACTS, browser_context, login_script, screenshot, wait_until

LONG_ID = "x" * 65


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_svc, "PORTS", range(18260, 18280))  # this suite's ports
        with serve(tmp_path_factory.mktemp("dash-url")) as running:
            yield running


@pytest.fixture(scope="module")
def context(live: Any) -> Iterator[Any]:
    with browser_context() as made:
        made.add_init_script(login_script(live.tokens["operator"]))
        yield made


@pytest.mark.parametrize(
    ("query", "key", "shown"),
    [
        ("sort=bogus&q=kiosk", "sort", "ignored sort=bogus: not one of sink, sink:desc,"),
        ("nothing=yes&q=kiosk", "nothing", "ignored nothing=yes: not 1"),
        ("range=bogus&q=kiosk", "range", "ignored range=bogus: not one of 3600, 86400,"),
        (
            "prefix=xyz&q=kiosk",
            "prefix",
            "ignored prefix=xyz: not what the API takes (^[0-9a-fA-F]{1,64}$)",
        ),
        (
            f"decode={LONG_ID}&q=kiosk",
            "decode",
            f"ignored decode={LONG_ID}: longer than 64 characters",
        ),
        # the page's checks pass it (a date and time); the API refuses a time before 1970
        (
            "range=custom&since=1960-01-01T00:00&q=kiosk",
            "since",
            "ignored since=1960-01-01T00:00: refused by the service (v1/",
        ),
    ],
)
def test_one_bad_value_is_dropped_and_the_rest_loads(
    live: Any, context: Any, query: str, key: str, shown: str
) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(f"{live.url}/dashboard/?{query}")
        wait_until(
            page,
            "performance.getEntriesByName('dashboard-rendered').length > 0"
            " && document.querySelector('#status').textContent.startsWith('updated')",
        )
        notice = page.inner_text("#notice")
        assert page.is_visible("#notice")
        assert notice.startswith(shown), notice
        assert page.is_hidden("#stale")
        assert "Nothing could be loaded" not in page.inner_text("body")
        assert page.locator("#chart-time canvas").count() >= 1  # the panels drew
        kept = parse_qs(urlsplit(page.url).query)
        assert key not in kept, page.url
        assert kept["q"] == ["kiosk"]  # the rest of the view is kept
        assert page.input_value("#sink-q") == "kiosk"
        screenshot(page, f"url-ignored-{key}", DASHBOARD_ARTIFACTS)
        assert errors == []
    finally:
        page.close()
