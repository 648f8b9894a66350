"""Browser tests' driver: Playwright on Debian's Chromium (``/usr/bin/chromium``), never a
downloaded browser, with a fresh profile per test. ``.ci/run`` installs the package; without it
the browser tests skip, unless ``WAI_REQUIRE_BROWSER=1`` (set in CI) makes them fail."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "out" / "browser-tests"


def require_browser() -> None:
    """Skip (or, under ``WAI_REQUIRE_BROWSER=1``, fail) where the browser cannot run."""
    missing = []
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (the test extra)")
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if os.environ.get("WAI_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Any]:
    """A browser context on a fresh, throw-away profile."""
    from playwright.sync_api import sync_playwright

    require_browser()
    profile = tempfile.mkdtemp(prefix="wai-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=ARGS,
                viewport={"width": 1280, "height": 1000},
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def wait_until(page: Any, expression: str, timeout_s: float = 30) -> None:
    """Poll a JavaScript expression until it is truthy. ``page.wait_for_function`` evaluates
    strings with ``eval``, which the dashboard's Content-Security-Policy forbids."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout_s} s: {expression}")
        time.sleep(0.02)


def screenshot(page: Any, name: str) -> Path:
    """Keep a screenshot as a test artifact (``out/browser-tests/``, git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
