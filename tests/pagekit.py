"""Browser test kit for the page (service/web/page_files/) and the dashboard: Debian's Chromium
driven by Playwright, and a loopback server for the page's site. tests/conftest.py's
``browser`` fixture hands out :func:`browser_page` after :func:`require_browser`.

The page's data routes take a bearer token (docs/page.md): :func:`serve_service` creates a sink
token in the service's store and yields it; :func:`browser_page` (``token=``) puts it in the
page's sessionStorage, where the page keeps the token its login form takes (never in a URL).

The browser is always ``/usr/bin/chromium`` (never a downloaded one), headless, with a fresh
profile and no network beyond 127.0.0.1. Without it (or without Playwright) the browser tests
skip, unless ``WAI_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where they fail. Screenshots land
in ``test-artifacts/page/`` (the dashboard's in ``out/browser-tests/``; both git-ignored).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.dispatch.offer import (
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    CPU_WEBNN,
    GPU_ONNX_RUNTIME,
    GPU_WEBNN,
    GPU_WGSL,
    NPU_WEBNN,
)

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "page"
DASHBOARD_ARTIFACTS = ROOT / "out" / "browser-tests"
PORTS = range(18300, 18400)  # the loopback ports these tests may use
BASE_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
WEBNN_ARGS = ["--enable-features=WebMachineLearningNeuralNetwork"]
#: The page's offer (js/app.js OFFER; tests/page/test_page_waiops_wasm.py holds the two equal):
#: WebNN, ONNX Runtime Web, then the integer program on WebGPU and on WebAssembly.
PAGE_OFFER = (
    NPU_WEBNN,
    GPU_WEBNN,
    CPU_WEBNN,
    GPU_ONNX_RUNTIME,
    CPU_ONNX_RUNTIME,
    GPU_WGSL,
    CPU_WAI_OPS,
)
#: Where the page (service/web/page_files/js/auth.js) and the dashboard keep their token.
TOKEN_KEY = "wai-dispatch.token"


def login_script(token: str) -> str:
    """An init script that logs a page of this suite's loopback service in with ``token``, as
    the page's login form does (sessionStorage), before the page's own scripts run."""
    return (
        "if (location.protocol === 'http:') "
        f"sessionStorage.setItem({json.dumps(TOKEN_KEY)}, {json.dumps(token)});"
    )


def require_browser() -> None:
    """Skip (or, under WAI_REQUIRE_BROWSER=1, fail) when the browser or Playwright is missing."""
    missing = None
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} is not installed (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "playwright is not installed (pip install -e '.[test]')"
    if missing is not None:
        if os.environ.get("WAI_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    continue
                raise
            return port
    raise RuntimeError("no free port in 18300-18399")


@contextlib.contextmanager
def serve_service(data_dir: Path, **settings: Any) -> Iterator[tuple[str, Any, str]]:
    """The real HTTP service (``wai-dispatch serve``'s app on uvicorn, SQLite store) on a
    loopback port of this suite's range; yields the page's URL (``…/page/``), the page's
    data (:class:`service.web.page_data.PageData`) as the service made it, and a sink token
    (the page's data routes take one)."""
    import httpx
    import uvicorn

    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load
    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    port = free_port()
    chosen = load(data_dir=data_dir, port=port, **{"warm": False, **settings})
    store = ReportStore(chosen.url)
    store.migrate()
    token = bearer.create(store, "page-tests", bearer.Role.sink)
    store.dispose()
    app = create_app(chosen)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}/page/"
    try:
        auth = {"Authorization": f"Bearer {token}"}
        httpx.get(url + "samples.json", headers=auth, timeout=30)  # made on first use
        yield url, getattr(app.state, "page_data", None), token  # (None: the page is off)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextlib.contextmanager
def browser_page(
    extra_args: list[str], init_script: str | None = None, token: str | None = None
) -> Iterator[Any]:
    """A fresh headless Chromium page; requests leaving 127.0.0.1 are aborted. With ``token``
    the page is logged in (:func:`login_script`)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=[*BASE_ARGS, *extra_args]
        )
        try:
            context = browser.new_context()
            context.route(
                lambda url: not url.startswith("http://127.0.0.1:"), lambda route: route.abort()
            )
            if token is not None:
                context.add_init_script(login_script(token))
            if init_script:
                context.add_init_script(init_script)
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.errors = errors
            yield page
        finally:
            browser.close()


@contextlib.contextmanager
def browser_context(**options: Any) -> Iterator[Any]:
    """A headless browser context on a fresh, throw-away profile (the dashboard's tests);
    ``options`` go to Playwright's ``launch_persistent_context`` (``timezone_id``, …)."""
    from playwright.sync_api import sync_playwright

    require_browser()
    profile = tempfile.mkdtemp(prefix="wai-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                headless=True,
                args=[*BASE_ARGS, "--headless", "--disable-gpu"],
                **{"viewport": {"width": 1280, "height": 1000}, **options},
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


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_function("() => window.waiPage && window.waiPage.ready === true", timeout=30_000)


def screenshot(page: Any, name: str, folder: Path = ARTIFACTS) -> Path:
    """Keep a screenshot as a test artifact (git-ignored)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
