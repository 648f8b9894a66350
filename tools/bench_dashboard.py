"""``python -m wai_dispatch.tools.bench_dashboard [--count 100000] [--postgres URL]``: the
dashboard's cost with a full store. Seeds ``--count`` reports (tools/seed_reports.py) and a few
hundred run reports, serves them with uvicorn on 127.0.0.1, and measures

- the summary endpoints' latency (p50/p99 over ``--repeat`` requests) for the dashboard's two
  usual views: the last 24 hours (15-minute buckets) and the whole seeded month (daily buckets);
- the dashboard's first paint and its first complete render in Debian's Chromium (the Performance
  API: ``first-contentful-paint`` and the page's ``dashboard-rendered`` mark).

On SQLite always; on PostgreSQL with ``--postgres postgresql://…/db``
(an admin URL: a database is created for the run and dropped after). Anchors: summary ≤ 100 ms,
first paint ≤ 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from wai_dispatch.service.decoding.settings import load
from wai_dispatch.service.governance import parse_run_report
from wai_dispatch.service.store import tokens
from wai_dispatch.service.store.policies import PolicyStore, submit
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools._service import serve
from wai_dispatch.tools.seed_reports import seed

PORT = 18250


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def _database(admin_url: str | None, folder: Path) -> Iterator[str]:
    if admin_url is None:
        yield f"sqlite:///{folder / 'reports.db'}"
        return

    url = admin_url.replace("postgresql://", "postgresql+psycopg://", 1)
    name = f"wai_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _seed_governance(store: Any, runs: int) -> None:
    a = "a" * 64
    policies = PolicyStore(store)
    policies.set(
        "format: wai-model-policy/1\nclasses:\n"
        "  kiosk:\n    sinks: [kiosk-1, kiosk-2]\n    tiers: [none]\n"
        f"    sets: [{{capability: wai.neural.bmshj2018, digests: [{a}]}}]\n",
        by="bench",
    )
    ran = {"unit": "npu", "backend": "model-runtime", "arithmetic": "float", "tier": "none",
           "placement": {"npu": 21, "gpu": 0, "cpu": 0, "unknown": 0}}  # fmt: skip
    report = {"kind": "wai-neural-dispatch/1", "capability": "wai.neural.bmshj2018",
              "needed": "none", "ran": ran, "refused": []}  # fmt: skip
    for i in range(runs):
        digest = a if i % 4 else "c" * 64  # every fourth run report breaks the policy
        sink = f"kiosk-{1 + i % 2}"
        obj = {
            "format": "wai-run-report/1",
            "id": f"bench-{i}",
            "sink": sink,
            "decodes": [{"set_digest": digest, "symbols_digest": None, "report": report}],
        }
        submit(store, policies, parse_run_report(obj), str(i).encode(), sink=sink)


@contextmanager
def _serve(data_dir: Path, url: str) -> Iterator[tuple[str, str]]:
    settings = load(data_dir=data_dir, database_url=url, port=PORT, log_level="error")
    store = ReportStore(settings.url)
    operator = tokens.create(store, "bench-operator", tokens.Role.operator)
    store.dispose()
    with serve(settings) as base:
        yield base, operator


def _latency(base: str, token: str, repeat: int) -> list[tuple[str, float, float]]:
    import httpx

    now = int(time.time() * 1000)
    views: dict[str, tuple[str, dict[str, int | str]]] = {
        "summary, last 24 h": ("/v1/reports/summary", {"since_ms": now - 86_400_000,
                                                        "until_ms": now, "bucket_s": 900}),
        "summary, 30 days": ("/v1/reports/summary", {"since_ms": now - 30 * 86_400_000,
                                                      "until_ms": now, "bucket_s": 86_400}),
        "summary, 30 days, one sink": ("/v1/reports/summary", {
            "since_ms": now - 30 * 86_400_000, "until_ms": now, "bucket_s": 86_400,
            "sink": "sink-003"}),
        "run-reports summary, 30 days": ("/v1/run-reports/summary", {
            "since_ms": now - 30 * 86_400_000, "until_ms": now}),
        "latest 25 reports": ("/v1/reports", {"limit": 25, "since_ms": now - 86_400_000}),
    }  # fmt: skip
    out = []
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=auth, timeout=300) as client:
        for name, (path, params) in views.items():
            client.get(path, params=params).raise_for_status()  # warm
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                client.get(path, params=params).raise_for_status()
                times.append((time.perf_counter() - t0) * 1000)
            out.append((name, statistics.median(times), _pct(times, 0.99)))
    return out


def _wait(page: Any, expression: str, timeout_s: float = 60) -> None:
    """Poll ``expression`` (page.evaluate runs under the page's CSP, unlike wait_for_function,
    which needs eval)."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(expression)
        time.sleep(0.01)


def _paint(base: str, token: str, loads: int) -> tuple[float, float]:
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"]  # fmt: skip
    fcp, rendered = [], []
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium", headless=True, args=args
        )
        ctx.add_init_script(f"sessionStorage.setItem('wai-dispatch.token', {token!r})")
        page = ctx.new_page()
        for _ in range(loads + 1):
            page.goto(f"{base}/dashboard/")
            _wait(page, "performance.getEntriesByName('dashboard-rendered').length > 0")
            fcp.append(
                page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
            )
            rendered.append(page.evaluate(
                "performance.getEntriesByName('dashboard-rendered')[0].startTime"))  # fmt: skip
        ctx.close()
    return statistics.median(fcp[1:]), statistics.median(rendered[1:])


def run(count: int, admin_url: str | None, repeat: int, loads: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="wai-bench-") as tmp,
        _database(admin_url, Path(tmp)) as url,
    ):
        store = ReportStore(url)
        store.migrate()
        t0 = time.perf_counter()
        seed(store, count)
        _seed_governance(store, 400)
        kind = store.dialect
        print(f"{kind}: seeded {count:,} reports and 400 run reports in "
              f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
        store.dispose()
        with _serve(Path(tmp), url) as (base, token):
            for name, p50, p99 in _latency(base, token, repeat):
                print(f"  {name:32} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   (anchor ≤ 100 ms)")
            fcp, rendered = _paint(base, token, loads)
            print(f"  dashboard first paint {fcp:7.0f} ms, all panels drawn {rendered:7.0f} ms "
                  f"(median of {loads} loads; anchor: first paint ≤ 1000 ms)")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.bench_dashboard")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument(
        "--postgres",
        metavar="ADMIN_URL",
        help="also measure on PostgreSQL (an admin URL)",
    )
    parser.add_argument("--repeat", type=int, default=40, help="requests per view")
    parser.add_argument("--loads", type=int, default=5, help="page loads measured")
    args = parser.parse_args(argv)
    run(args.count, None, args.repeat, args.loads)
    if args.postgres:
        run(args.count, args.postgres, args.repeat, args.loads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
