"""``python -m wai_dispatch.tools.seed_reports --count 100000``: fill a report store with
synthetic but valid ``wai-neural-dispatch/1`` reports (and their refusals), spread over sinks,
capabilities, sets, paths and time, for the dashboard's tests and benchmarks.

Deterministic for a ``--seed``. Rows go in by bulk inserts with their ``seq`` chosen here, so
100,000 reports take seconds, not a statement each; on PostgreSQL the sequence is moved past
them afterwards, so the service's own inserts continue after the seeded rows.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, insert, select, text

from wai_dispatch.service.decoding.settings import load
from wai_dispatch.service.store.db import ReportStore
from wai_dispatch.service.store.models import RefusalRow, ReportRow

BMSHJ, INT = "wai.neural.bmshj2018", "wai.neural.int_synth"
NPU = {"unit": "npu", "backend": "model-runtime", "arithmetic": "float"}
ORT = {"unit": "cpu", "backend": "onnx-runtime", "arithmetic": "float"}
WAIOPS = {"unit": "cpu", "backend": "wai-ops", "arithmetic": "integer"}
WGSL = {"unit": "gpu", "backend": "wgsl", "arithmetic": "integer"}
CHUNK = 5000


def _path(p: dict[str, str]) -> str:
    return f"{p['unit']}/{p['backend']}/{p['arithmetic']}"


def _report(rng: random.Random) -> dict[str, Any]:
    """One valid report of a plausible fleet mix (validated by the tests, not here)."""
    ran: dict[str, Any]  # the path that ran; its placement is a mapping or None
    roll = rng.random()
    if roll < 0.45:  # the neural processor ran, some operations left on the CPU
        npu = rng.choice((21, 21, 21, 18))
        ran = {**NPU, "tier": "none", "placement": {"npu": npu, "gpu": 0, "cpu": 21 - npu,
                                                     "unknown": 0}}  # fmt: skip
        return {"kind": "wai-neural-dispatch/1", "capability": BMSHJ, "needed": "none",
                "ran": ran, "refused": []}  # fmt: skip
    if roll < 0.75:  # no neural processor: ONNX Runtime on the CPU
        ran = {**ORT, "tier": "none", "placement": None}
        refused = [{**NPU, "reason": rng.choice(("dispatch_unit_absent", "dispatch_not_placed"))}]
        return {"kind": "wai-neural-dispatch/1", "capability": BMSHJ, "needed": "none",
                "ran": ran, "refused": refused}  # fmt: skip
    if roll < 0.92:  # the integer capability on the interpreter or the GPU kernels
        ran = {**rng.choice((WAIOPS, WGSL)), "tier": "decode-equivalence", "placement": None}
        refused = [{**NPU, "reason": "dispatch_tier_refused"},
                   {**ORT, "reason": "dispatch_tier_refused"}]  # fmt: skip
        return {"kind": "wai-neural-dispatch/1", "capability": INT,
                "needed": "decode-equivalence", "ran": ran, "refused": refused}  # fmt: skip
    # intent replicate on the float capability: no path may run it
    refused = [{**NPU, "reason": "dispatch_tier_refused"},
               {**ORT, "reason": "dispatch_tier_refused"},
               {**WAIOPS, "reason": "dispatch_arithmetic_mismatch"}]  # fmt: skip
    return {"kind": "wai-neural-dispatch/1", "capability": BMSHJ,
            "needed": "decode-equivalence", "ran": None, "refused": refused}  # fmt: skip


def seed(
    store: ReportStore,
    count: int,
    *,
    sinks: int = 24,
    days: float = 30.0,
    seed_value: int = 1,
    now_ms: int | None = None,
) -> int:
    """Insert ``count`` reports ending at ``now_ms``; returns how many were inserted."""
    rng = random.Random(seed_value)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    span = int(days * 86_400_000)
    sink_names = [f"sink-{i:03d}" for i in range(sinks)]
    sets = {BMSHJ: [f"{i:x}" * 64 for i in (10, 11)], INT: [f"{i:x}" * 64 for i in (12,)]}
    with store.engine.begin() as conn:
        start = int(conn.execute(select(func.coalesce(func.max(ReportRow.seq), 0))).scalar_one())
    done = 0
    while done < count:
        rows, refusals = [], []
        for _ in range(min(CHUNK, count - done)):
            done += 1
            seq = start + done
            report = _report(rng)
            ran = report["ran"]
            placement = (ran or {}).get("placement") or {}
            rows.append({
                "seq": seq, "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "request_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "created_ms": now - rng.randrange(span), "sink": rng.choice(sink_names),
                "role": "primary", "capability": report["capability"],
                "set_digest": rng.choice(sets[report["capability"]]),
                "symbols_digest": f"{rng.getrandbits(256):064x}", "rgb_digest": None,
                "needed": report["needed"], "path_ran": _path(ran) if ran else None,
                "tier": ran["tier"] if ran else None, "outcome": "decoded" if ran else "refused",
                "duration_ms": round(rng.uniform(20, 400), 3),
                **{f"placement_{u}": int(placement.get(u, 0))
                   for u in ("npu", "gpu", "cpu", "unknown")},
                "report": json.dumps(report, separators=(",", ":")),
                "source": "service", "run_report": None,
            })  # fmt: skip
            refusals += [
                {"report_seq": seq, "position": i, "path": _path(r), "code": r["reason"]}
                for i, r in enumerate(report["refused"])
            ]
        with store.engine.begin() as conn:
            conn.execute(insert(ReportRow), rows)
            if refusals:
                conn.execute(insert(RefusalRow), refusals)
    if store.dialect == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text(
                "SELECT setval(pg_get_serial_sequence('reports', 'seq'), "
                "(SELECT max(seq) FROM reports))"
            ))  # fmt: skip
    if store.dialect == "postgresql":  # statistics, and the visibility map index-only scans need
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE reports, report_refusals"))
    else:
        with store.engine.begin() as conn:  # fresh statistics for the planner
            conn.execute(text("ANALYZE"))
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.seed_reports")
    parser.add_argument("--count", type=int, default=100_000, help="reports to insert")
    parser.add_argument("--database-url", help="SQLAlchemy URL (default: the data dir's SQLite)")
    parser.add_argument("--data-dir", help="the data directory (default: WAI_DATA_DIR or XDG's)")
    parser.add_argument("--sinks", type=int, default=24)
    parser.add_argument("--days", type=float, default=30.0, help="spread over this many days")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.count < 0 or args.sinks < 1 or args.days <= 0:
        parser.error("--count >= 0, --sinks >= 1 and --days > 0")

    url = load(data_dir=args.data_dir, database_url=args.database_url).url
    store = ReportStore(url)
    store.migrate()
    t0 = time.perf_counter()
    n = seed(store, args.count, sinks=args.sinks, days=args.days, seed_value=args.seed)
    print(f"seeded {n} reports into {store.dialect} in {time.perf_counter() - t0:.1f} s")
    store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
