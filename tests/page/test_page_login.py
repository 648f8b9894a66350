"""The page's login (service/web/page_files/js/auth.js) in Debian's Chromium against the real
service: without a token the page shows only its login form and asks the service for no data;
the token typed there is kept in the tab (sessionStorage, never a URL) and sent as
``Authorization: Bearer`` with every data request; a token the service refuses brings the login
back with the service's message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pagekit import screenshot, serve_service, wait_until

DATA = ("samples", "sets/", "reference/", "corpus")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[tuple[str, str]]:
    with serve_service(tmp_path_factory.mktemp("login")) as (url, _, token):
        yield url, token


def _watch(page: Any, url: str) -> list[tuple[str, str | None]]:
    """The page's data requests: (path below /page/, its Authorization header)."""
    seen: list[tuple[str, str | None]] = []

    def on(request: Any) -> None:
        path = request.url.removeprefix(url)
        if path.startswith(DATA):
            seen.append((path, request.headers.get("authorization")))

    page.on("request", on)
    return seen


def test_the_page_asks_for_a_token_and_sends_it(served: tuple[str, str], browser: Any) -> None:
    url, token = served
    with browser([]) as page:
        seen = _watch(page, url)
        page.goto(url)
        wait_until(page, "!!document.querySelector('#login-view:not([hidden])')")
        assert page.is_hidden("main") and seen == []  # nothing asked of the service yet
        page.fill("#token", token)
        page.click("#login-form button[type=submit]")
        wait_until(page, "window.waiPage && window.waiPage.ready === true")
        assert page.is_visible("main") and page.is_hidden("#login-view")
        result = page.evaluate("window.waiPage.decodeSample()")
        assert result["parts"] and "error" not in result, result
        assert page.evaluate("sessionStorage.getItem('wai-dispatch.token')") == token
        assert token not in page.url
        paths = {path.split("?")[0].split("/")[0] for path, _ in seen}
        assert {"samples.json", "samples", "sets"} <= paths
        assert {auth for _, auth in seen} == {f"Bearer {token}"}
        assert page.errors == []


@pytest.mark.parametrize("page_name", ["", "verify.html", "verify-int.html"])
def test_a_refused_token_brings_the_login_back(
    served: tuple[str, str], browser: Any, page_name: str
) -> None:
    url, _ = served
    with browser([], token="wai_never-issued") as page:
        page.goto(url + page_name)
        wait_until(page, "(document.querySelector('#login-message')?.textContent || '') !== ''")
        message = page.inner_text("#login-message")
        assert "401 token_unknown" in message and "not a live token" in message, message
        assert page.is_visible("#login-view") and page.is_hidden("main")
        screenshot(page, f"login-refused-{page_name.removesuffix('.html') or 'index'}")
