"""``python -m wai_dispatch.tools.bench_summary``: the dashboard's month summary read from the
per-hour roll-ups beside the same summary counted from the reports alone (the anchor,
``summary(…, rollups=False)``, same run and store), on SQLite and PostgreSQL, with a check
that both agree; then one retention pass. Times are p50 wall and CPU time (on SQLite the CPU
time is the database's too). Goal: the month summary ≤ 100 ms at 1,000,000 reports."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters, summary
from wai_dispatch.service.store.retention import prune
from wai_dispatch.tools.harness import database, parser, postgres, postgres_options
from wai_dispatch.tools.seed_reports import seed

DAY_MS = 86_400_000
GOAL_MS = 100.0


def _time(
    store: ReportStore, f: Filters, bucket_s: int, rollups: bool, repeat: int, warm: bool
) -> tuple[float, float, float, dict[str, Any]]:
    """p50 and max wall milliseconds, p50 CPU milliseconds of this process (on SQLite that is
    the database's work too), and the answer."""
    if warm:
        summary(store, f, bucket_s=bucket_s, rollups=rollups)
    walls, cpus, got = [], [], {}
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        got = summary(store, f, bucket_s=bucket_s, rollups=rollups)
        walls.append((time.perf_counter() - t0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
    return statistics.median(walls), max(walls), statistics.median(cpus), got


def run(count: int, admin_url: str | None, repeat: int, raw_repeat: int) -> bool:
    """One database; returns whether the month summary met its goal."""
    met = True
    with (
        tempfile.TemporaryDirectory(prefix="wai-bench-") as tmp,
        database(admin_url, Path(tmp)) as url,
    ):
        store = ReportStore(url)
        store.migrate()
        now = int(time.time() * 1000)
        t0 = time.perf_counter()
        seed(store, count, now_ms=now)
        seconds = time.perf_counter() - t0
        print(
            f"{store.dialect}: seeded {count:,} reports (and their roll-ups) in {seconds:.1f} s "
            f"({count / seconds:,.0f} reports/s)",
            flush=True,
        )
        month = Filters(since_ms=now - 30 * DAY_MS + 1234, until_ms=now)
        views = {
            "summary, 30 days (daily buckets)": (month, 86_400),
            "summary, 30 days (hourly buckets)": (month, 3_600),
            "summary, 30 days, one sink": (
                Filters(sink="sink-003", since_ms=month.since_ms, until_ms=now),
                86_400,
            ),
            "summary, 30 days, one refusal code": (
                Filters(reason="dispatch_tier_refused", since_ms=month.since_ms, until_ms=now),
                86_400,
            ),
            "summary, last 24 h (15-min buckets)": (
                Filters(since_ms=now - DAY_MS, until_ms=now),
                900,
            ),
        }
        for name, (f, bucket_s) in views.items():
            p50, worst, cpu, got = _time(store, f, bucket_s, True, repeat, warm=True)
            raw50, _, raw_cpu, want = _time(store, f, bucket_s, False, raw_repeat, warm=False)
            same = "same answer" if got == want else "DIFFERENT ANSWER"
            goal = ""
            if name.startswith("summary, 30 days (daily"):
                met = p50 <= GOAL_MS and got == want
                goal = f"  goal ≤ {GOAL_MS:.0f} ms: {'met' if met else 'NOT MET'}"
            line = f"  {name:37} roll-ups p50 {p50:7.1f} ms (max {worst:6.1f}, cpu {cpu:6.1f})  "
            line += f"anchor, reports only: {raw50:8.1f} ms (cpu {raw_cpu:7.1f})  "
            line += f"×{raw50 / p50:6.1f}  {same}{goal}"
            print(line, flush=True)
        hours = Filters(
            since_ms=now - 30 * DAY_MS - now % 3_600_000, until_ms=now - now % 3_600_000
        )
        before = summary(store, hours, bucket_s=86_400)
        t0 = time.perf_counter()
        done = prune(store, report_days=20, rollup_days=0, now_ms=now)
        seconds = time.perf_counter() - t0
        kept = summary(store, hours, bucket_s=86_400) == before
        rate = done.reports / max(seconds, 1e-9)
        line = f"  retention, 20 days: pruned {done.reports:,} reports in {seconds:.1f} s "
        line += f"({rate:,.0f}/s, 2,000 a transaction); the month's whole-hour summary after it: "
        print(line + ("unchanged" if kept else "CHANGED"), flush=True)
        met = met and kept
        store.dispose()
    return met


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("summary", __doc__, quick="100,000 reports (a smoke run)")
    p.add_argument("--count", type=int, default=1_000_000)
    postgres_options(p)
    p.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    p.add_argument("--repeat", type=int, default=20, help="roll-up summaries timed per view")
    p.add_argument("--raw-repeat", type=int, default=2, help="reports-only summaries timed")
    args = p.parse_args(argv)
    count = 100_000 if args.quick else args.count
    met = True if args.no_sqlite else run(count, None, args.repeat, args.raw_repeat)
    pg = postgres(args)
    if pg is not None:
        met = run(count, pg, args.repeat, args.raw_repeat) and met
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
