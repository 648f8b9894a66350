"""Run the page's WebNN verifier (service/web/page_files/verify.html) in a Chromium-family
browser and print its summary: every bundled sample decoded in the page and held to the native
CPU decode (§6.4), and decode-equivalence refused before any WebNN context (§6.2). Exit status 0
only when the browser gave WebNN and every sample passed (spec §8); 1 otherwise.

    python -m wai_dispatch.tools.verify_page --browser "$CHROME"

It verifies a running service's page (``--url`` with ``--token-file``, a sink token or above),
or runs the service on a loopback port of its own (tools/_service.py), and starts the browser
with WebNN enabled and a fresh profile; it needs Playwright (the test extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wai_dispatch.dispatch.offer import CPU_ONNX_RUNTIME
from wai_dispatch.service.settings import load
from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools._service import serve
from wai_dispatch.tools.harness import free_port

#: Where the page keeps its bearer token (service/web/page_files/js/auth.js): this tab's
#: sessionStorage, as its login form does; the token never goes into a URL.
TOKEN_KEY = "wai-dispatch.token"
WEBNN_FEATURE = "--enable-features=WebMachineLearningNeuralNetwork"
BROWSER_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    WEBNN_FEATURE,
]


def verify(
    browser: str,
    *,
    url: str,
    token: str,
    headless: bool = True,
    extra_args: list[str] | None = None,
    init_script: str | None = None,
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Open ``<url>verify.html`` in ``browser``, logged in with ``token``, and return the
    verifier's summary."""
    from playwright.sync_api import sync_playwright  # lazy: the test extra

    with sync_playwright() as pw:
        instance = pw.chromium.launch(
            executable_path=browser, headless=headless, args=[*BROWSER_ARGS, *(extra_args or [])]
        )
        try:
            context = instance.new_context()
            context.add_init_script(
                f"sessionStorage.setItem({json.dumps(TOKEN_KEY)}, {json.dumps(token)});"
            )
            if init_script:
                context.add_init_script(init_script)
            page = context.new_page()
            page.goto(url + "verify.html")
            page.wait_for_function(
                "() => window.waiVerify && window.waiVerify.done", timeout=timeout_s * 1000
            )
            summary: dict[str, Any] = page.evaluate("window.waiVerify")
            return summary
        finally:
            instance.close()


@contextlib.contextmanager
def serve_page(port: int = 0) -> Iterator[tuple[str, str]]:
    """The HTTP service (tools/_service.py) on 127.0.0.1 with a fresh data directory and the
    CPU offer; yields its page's URL (``…/page/``) and a sink token made in its store, and stops
    it when the block ends."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = load(
            data_dir=Path(tmp) / "data",
            offer=str(CPU_ONNX_RUNTIME),
            host="127.0.0.1",
            port=port or free_port(),
            log_level="ERROR",
        )
        store = ReportStore(settings.url)
        store.migrate()
        token = bearer.create(store, "verify-page", bearer.Role.sink)
        store.dispose()
        with serve(settings) as base:
            yield base + "/page/", token


def _read_token(where: str) -> str:
    text = sys.stdin.read() if where == "-" else Path(where).read_text(encoding="utf-8")
    return text.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.verify_page")
    parser.add_argument("--browser", required=True, help="the Chromium-family executable")
    parser.add_argument("--headed", action="store_true", help="show the browser window")
    parser.add_argument("--url", help="a running service's page (default: start one)")
    parser.add_argument(
        "--token-file",
        help="with --url: a file holding a bearer token (sink role or above); '-': standard input",
    )
    parser.add_argument("--port", type=int, default=0, help="its loopback port (default: any)")
    parser.add_argument("--json", action="store_true", help="print the whole summary as JSON")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="start the browser with --no-sandbox (needed as root, e.g. in a container)",
    )
    args = parser.parse_args(argv)
    extra = ["--no-sandbox"] if args.no_sandbox else []
    if args.url:
        if not args.token_file:
            parser.error("--url needs --token-file: the page's data routes take a bearer token")
        token = _read_token(args.token_file)
        summary = verify(
            args.browser, url=args.url, token=token, headless=not args.headed, extra_args=extra
        )
    else:
        with serve_page(args.port) as (url, token):
            summary = verify(
                args.browser, url=url, token=token, headless=not args.headed, extra_args=extra
            )
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"browser  {summary.get('userAgent', '?')}")
        for row in summary.get("samples", []):
            psnr = row.get("psnr")
            pic = "" if psnr is None else f"  {psnr:.2f} dB, max diff {row.get('maxDiff')}"
            print(f"{row['verdict']:7}  {row['sample']}  ran {row.get('ran') or 'none'}{pic}")
            for why in row.get("why", []):
                print(f"         {why}")
        if summary.get("error"):
            print(f"error    {summary['error']}")
        print(f"verdict  {summary['verdict']}")
    return 0 if summary.get("verdict") == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
