"""``wai-dispatch reports prune``: retention, run once against the report store (the service's
database: ``WAI_DATABASE_URL``, else ``<data_dir>/reports.db``, migrated first). It deletes the
reports older than ``WAI_REPORT_RETENTION_DAYS`` (or ``--days``) and the per-hour roll-ups
older than ``WAI_ROLLUP_RETENTION_DAYS`` (or ``--rollup-days``; 0 keeps them), in batches, with
the function the service's retention thread runs (service/store/retention.py)."""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime

from wai_dispatch.cli.options import settings
from wai_dispatch.service.decoding.errors import SettingsInvalid
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.retention import prune


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def run_prune(args: argparse.Namespace) -> int:
    if args.batch < 1:
        raise SettingsInvalid("--batch is at least 1")
    chosen = settings(args)
    store = ReportStore(chosen.url)
    t0 = time.perf_counter()
    try:
        store.migrate()
        done = prune(
            store,
            report_days=chosen.report_retention_days,
            rollup_days=chosen.rollup_retention_days,
            batch=args.batch,
        )
    finally:  # a store that is down: one store_down line (cli/run.py)
        store.dispose()
    seconds = time.perf_counter() - t0
    out = {
        "reports": done.reports,
        "reports_before": _iso(done.reports_before_ms),
        "rollup_hours": done.rollup_hours,
        "rollups_before": _iso(done.rollups_before_ms),
        "seconds": round(seconds, 3),
    }
    if args.json:
        print(json.dumps(out))
        return 0
    if done.reports_before_ms is None:
        print("reports: kept forever (retention 0 days); none pruned")
    else:
        print(f"reports: pruned {done.reports} created before {out['reports_before']}")
    if done.rollups_before_ms is None:
        print("roll-ups: kept forever (retention 0 days)")
    else:
        print(f"roll-ups: pruned {done.rollup_hours} hour(s) before {out['rollups_before']}")
    return 0
