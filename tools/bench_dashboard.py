"""``python -m wai_dispatch.tools.bench_dashboard``: the dashboard's cost with a full store.
Seeds ``--count`` reports (tools/seed_reports.py), run reports and request errors, serves them,
and loads three views in Chromium: each one's first paint, all panels drawn (the page's
``dashboard-rendered`` mark), and each API request's time in the page and alone (p50 of
``--repeat``). On SQLite, and on PostgreSQL with ``--postgres`` (an admin URL: a database is
made for the run and dropped after); ``--store URL`` measures a store seeded before
(``python -m wai_dispatch.tools.seed_reports``, ten million reports take a while), migrated,
nothing seeded or dropped. Goals: all panels ≤ 1 s, each request ≤ 100 ms."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text

from wai_dispatch.service.governance import parse_run_report
from wai_dispatch.service.settings import load
from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.policies import PolicyStore, submit
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.request_errors import ErrorLog
from wai_dispatch.tools._service import serve
from wai_dispatch.tools.dashboard_shots import report
from wai_dispatch.tools.harness import database, free_port, loadavg, timings, wait_until
from wai_dispatch.tools.harness import parser as harness_parser
from wai_dispatch.tools.seed_reports import seed


def _seed_governance(store: Any, runs: int) -> None:
    a = "a" * 64
    policies = PolicyStore(store)
    policies.set(
        "format: wai-model-policy/1\nclasses:\n"
        "  kiosk:\n    sinks: [kiosk-1, kiosk-2]\n    tiers: [none]\n"
        f"    sets: [{{capability: wai.neural.bmshj2018, digests: [{a}]}}]\n",
        by="bench",
    )
    ran_on_npu = report("npu")
    for i in range(runs):
        digest = a if i % 4 else "c" * 64  # every fourth run report breaks the policy
        sink = f"kiosk-{1 + i % 2}"
        obj = {
            "format": "wai-run-report/1",
            "id": f"bench-{i}",
            "sink": sink,
            "decodes": [{"set_digest": digest, "symbols_digest": None, "report": ran_on_npu}],
        }
        submit(store, policies, parse_run_report(obj), str(i).encode(), sink=sink)


@contextmanager
def _serve(data_dir: Path, url: str) -> Iterator[tuple[str, str]]:
    settings = load(data_dir=data_dir, database_url=url, port=free_port(), log_level="error")
    store = ReportStore(settings.url)
    operator = bearer.create(store, "bench-operator", bearer.Role.operator)
    store.dispose()
    with serve(settings) as base:
        yield base, operator


def _replay(base: str, token: str, urls: list[str], repeat: int) -> dict[str, float]:
    """Each API request the page made, alone and again (p50 over ``repeat``): its own time,
    without the page's other requests beside it."""
    import httpx

    out = {}
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=300) as client:
        for url in urls:

            def get(url: str = url) -> object:
                return client.get(url).raise_for_status()

            get()  # warm
            out[url] = statistics.median(timings(get, repeat)) * 1000
    return out


#: The dashboard's views measured: the default (last 24 hours), one sink, the last 30 days.
VIEWS = {"default view": "", "one sink": "?sink=sink-003", "30-day range": "?range=2592000"}

_RENDERED = "performance.getEntriesByName('dashboard-rendered').length > 0"
_RESOURCES = """performance.getEntriesByType('resource')
  .filter((e) => e.name.includes('/v1/'))
  .map((e) => [e.name, e.duration])"""


@dataclass
class View:
    fcp: list[float] = field(default_factory=list)
    rendered: list[float] = field(default_factory=list)
    requests: dict[str, list[float]] = field(default_factory=dict)  # by route: each load's ms
    urls: dict[str, str] = field(default_factory=dict)  # by route: the last load's URL


def _route(url: str) -> str:
    path = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
    return "/" + path


def _paint(base: str, token: str, loads: int) -> dict[str, View]:
    """Each view loaded ``loads + 1`` times (the first, a warm-up, not counted): first paint,
    all panels drawn (the page's ``dashboard-rendered`` mark) and each API request's time as
    the browser saw it (Resource Timing: the page's requests run side by side)."""
    from playwright.sync_api import sync_playwright

    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
    ]
    out: dict[str, View] = {}
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=args
        )
        ctx.add_init_script(f"sessionStorage.setItem('wai-dispatch.token', {token!r})")
        page = ctx.new_page()
        for name, query in VIEWS.items():
            view = out[name] = View()
            for i in range(loads + 1):
                page.goto(f"{base}/dashboard/{query}")
                # polled: page.evaluate runs under the page's CSP (wait_for_function needs eval)
                wait_until(lambda: page.evaluate(_RENDERED), 60, _RENDERED, every=0.01)
                if i == 0:
                    continue
                view.fcp.append(
                    page.evaluate(
                        "performance.getEntriesByName('first-contentful-paint')[0].startTime"
                    )
                )
                view.rendered.append(
                    page.evaluate("performance.getEntriesByName('dashboard-rendered')[0].startTime")
                )
                for url, ms in page.evaluate(_RESOURCES):
                    view.requests.setdefault(_route(url), []).append(float(ms))
                    view.urls[_route(url)] = url
        ctx.close()
    return out


def _report(views: dict[str, View], alone: dict[str, float], loads: int) -> None:
    for name, view in views.items():
        fcp, rendered = statistics.median(view.fcp), statistics.median(view.rendered)
        ok = "within" if rendered <= 1000 else "OVER"
        print(
            f"  {name}: first paint {fcp:5.0f} ms, all panels drawn {rendered:5.0f} ms "
            f"(median of {loads} loads; goal ≤ 1000 ms: {ok})"
        )
        for route, times in sorted(view.requests.items()):
            page_ms = statistics.median(times)
            own = alone.get(view.urls[route], float("nan"))
            flag = "" if own <= 100 else "   OVER 100 ms"
            print(f"      {route:28} {page_ms:6.1f} ms in the page, {own:6.1f} ms alone{flag}")


def _seed_errors(store: ReportStore, n: int, sinks: int) -> None:
    """``n`` request errors through the service's own writer: a third anonymous, the rest
    spread over the sinks (each sink's rows capped per hour as the service does)."""
    log = ErrorLog(store, interval_s=3600)
    try:
        for i in range(n):
            sink = None if i % 3 == 0 else f"sink-{i % sinks:03d}"
            log.note(
                401 if sink is None else 422,
                "token_unknown" if sink is None else "request_invalid",
                sink=sink,
                request_id=f"bench-{i}",
                method="GET",
                path="/v1/reports",
                route="/v1/reports",
            )
        log.flush(timeout_s=300)
    finally:
        log.close()


def measure(url: str, data_dir: Path, repeat: int, loads: int) -> None:
    """Serve the store at ``url`` and load the views (:func:`_paint`), then replay each request
    the page made alone (:func:`_replay`)."""
    with _serve(data_dir, url) as (base, token):
        views = _paint(base, token, loads)
        urls = sorted({u for v in views.values() for u in v.urls.values()})
        alone = _replay(base, token, urls, repeat)
        _report(views, alone, loads)
    print(f"  {loadavg()}", flush=True)


def run_seeded(url: str, repeat: int, loads: int) -> None:
    """:func:`measure` a store seeded before, migrated first."""
    store = ReportStore(url)
    store.migrate()
    with store.engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM reports")).scalar_one()
    print(f"{store.dialect}: {n:,} reports stored; {loadavg()}", flush=True)
    store.dispose()
    with tempfile.TemporaryDirectory(prefix="wai-bench-") as tmp:
        measure(url, Path(tmp), repeat, loads)


def run(
    count: int, admin_url: str | None, repeat: int, loads: int, sinks: int, days: float
) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="wai-bench-") as tmp,
        database(admin_url, Path(tmp)) as url,
    ):
        store = ReportStore(url)
        store.migrate()
        t0 = time.perf_counter()
        seed(store, count, sinks=sinks, days=days)
        seeded = time.perf_counter() - t0
        _seed_governance(store, 400)
        _seed_errors(store, min(50_000, max(100, count // 100)), sinks)
        kind = store.dialect
        print(
            f"{kind}: seeded {count:,} reports over {sinks:,} sinks and {days:g} days in "
            f"{seeded:.1f} s ({count / max(seeded, 1e-9):,.0f} reports/s), then 400 run "
            f"reports and request errors in {time.perf_counter() - t0 - seeded:.1f} s; "
            f"{loadavg()}"
        )
        store.dispose()
        measure(url, Path(tmp), repeat, loads)


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness_parser("dashboard", __doc__)
    parser.add_argument("--count", type=int, default=100_000, help="reports seeded")
    parser.add_argument("--sinks", type=int, default=1000, help="sinks they come from")
    parser.add_argument("--days", type=float, default=30.0, help="days they are spread over")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="also PostgreSQL (admin URL)")
    parser.add_argument("--repeat", type=int, default=10, help="each request again, alone")
    parser.add_argument("--loads", type=int, default=5, help="page loads measured")
    parser.add_argument("--store", metavar="URL", help="only this store, seeded before")
    args = parser.parse_args(argv)
    if args.store:
        run_seeded(args.store, args.repeat, args.loads)
        return 0
    run(args.count, None, args.repeat, args.loads, args.sinks, args.days)
    if args.postgres:
        run(args.count, args.postgres, args.repeat, args.loads, args.sinks, args.days)
    return 0


if __name__ == "__main__":
    sys.exit(main())
