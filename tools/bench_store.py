"""``python -m wai_dispatch.tools.bench_store``: acknowledged reports per second into the report
store through the service's own :class:`Recorder` (each writer thread makes one decode's
records with :func:`records_for` and waits until they are durable), at 1, 8 and 64 writers:
group commit beside one transaction per report (the anchor: group commit off), on SQLite and
PostgreSQL. Prints both rates and their ratio (group ÷ single: above 1 is faster), each
mode's p50 and p99 ``record`` latency, the transactions group commit made, and the rows and
bytes a report adds. The report is a decode on ``cpu/onnx-runtime/float`` with the NPU refused."""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import text

from wai_dispatch.dispatch import Report
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.records import ReportRecord, records_for
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.spool import Spool
from wai_dispatch.tools.harness import database, parser, postgres, postgres_options

REPORT = Report.from_json(
    {
        "kind": "wai-neural-dispatch/1",
        "capability": "wai.neural.bmshj2018",
        "needed": "none",
        "ran": {
            "unit": "cpu",
            "backend": "onnx-runtime",
            "arithmetic": "float",
            "tier": "none",
            "placement": {"npu": 0, "gpu": 0, "cpu": 16, "unknown": 0},
        },
        "refused": [
            {
                "unit": "npu",
                "backend": "model-runtime",
                "arithmetic": "float",
                "reason": "dispatch_unit_absent",
            }
        ],
    }
)
SET = "97e7f912140b9c16879eb5bff2281b514bbc3984b2fd45f37864b43e2d93cf32"
SYMBOLS = "09c6186a09fd0e7b795a2c99c0594dbfaafadfc0f47af871a26e32bfdfbe5c44"
RGB = "50f15b470b2da9af08c991281469f5e879c763b4f22208b0c3ddd669b3a754b4"
WINDOW_S = 0.002
MAX_RECORDS = 1000


def _one(sink: str) -> list[ReportRecord]:
    """One decode's records, as the use case makes them."""
    return records_for(
        [REPORT],
        request_id=str(uuid.uuid4()),
        sink=sink,
        set_digests=[SET],
        symbols_digests=[SYMBOLS],
        rgb_digest=RGB,
        duration_ms=85.0,
    )


def measure(
    store: ReportStore, folder: Path, writers: int, seconds: float, group: bool
) -> tuple[float, float, float, int]:
    """Reports/s acknowledged, median and p99 ``record`` ms, and transactions (group commit's
    batches; with it off, one a report)."""
    spool = Spool(folder / f"spool-{writers}-{int(group)}", max_bytes=1 << 30)
    recorder = Recorder(
        store,
        spool,
        retry_s=60,
        commit_window_s=WINDOW_S if group else None,
        commit_max=MAX_RECORDS,
    )
    start = threading.Barrier(writers + 1)
    stop = threading.Event()
    lat: list[list[float]] = [[] for _ in range(writers)]

    def writer(k: int) -> None:
        mine = lat[k]
        start.wait()
        n = 0
        while not stop.is_set():
            records = _one(f"sink-{(k * 7919 + n) % 1000:04d}")
            t0 = time.perf_counter()
            recorder.record(records)
            mine.append(time.perf_counter() - t0)
            n += 1

    threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(writers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    batches = recorder.group.batches if recorder.group else 0
    recorder.close()
    if spool.size():
        print(f"    warning: {spool.size()} bytes spooled (the store did not take them)")
    flat = sorted(x for xs in lat for x in xs)
    n = len(flat)
    p50 = statistics.median(flat) * 1000 if flat else 0.0
    p99 = flat[min(n - 1, int(n * 0.99))] * 1000 if flat else 0.0
    return n / took, p50, p99, batches if group else n


def footprint(store: ReportStore, path: Path | None) -> tuple[float, float]:
    """Rows (reports and refusals) and bytes (tables and indexes; SQLite: the file, its WAL
    checkpointed) per stored report."""
    with store.engine.connect() as conn:
        reports = int(conn.execute(text("SELECT count(*) FROM reports")).scalar_one())
        refusals = int(conn.execute(text("SELECT count(*) FROM report_refusals")).scalar_one())
        if store.dialect == "postgresql":
            size = int(
                conn.execute(
                    text(
                        "SELECT pg_total_relation_size('reports') + "
                        "pg_total_relation_size('report_refusals')"
                    )
                ).scalar_one()
            )
        else:
            assert path is not None
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            size = os.path.getsize(path)
    return (reports + refusals) / max(reports, 1), size / max(reports, 1)


def run(name: str, admin_url: str | None, writers: list[int], seconds: float) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="wai-bench-store-") as tmp,
        database(admin_url, Path(tmp)) as url,
    ):
        store = ReportStore(url)
        store.migrate()
        print(f"\n{name}: reports/s acknowledged through Recorder.record, {seconds:g} s each")
        head = (
            "writers",
            "single/s",
            "group/s",
            "ratio",
            "single p50/p99 ms",
            "group p50/p99 ms",
            "reports/tx",
        )
        widths = (7, 9, 9, 6, 18, 17, 10)
        print("  " + "  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
        for n in writers:
            single, s50, s99, _ = measure(store, Path(tmp), n, seconds, group=False)
            grouped, g50, g99, batches = measure(store, Path(tmp), n, seconds, group=True)
            per_tx = grouped * seconds / max(batches, 1)
            print(
                f"  {n:>7}  {single:>9.0f}  {grouped:>9.0f}  {grouped / single:>5.1f}×  "
                f"{s50:>8.2f}/{s99:<9.2f}  {g50:>8.2f}/{g99:<8.2f}  {per_tx:>10.1f}",
                flush=True,
            )
        path = None if admin_url else Path(tmp) / "reports.db"
        rows, size = footprint(store, path)
        print(f"  rows a report: {rows:.1f}; bytes a report (tables and indexes): {size:,.0f}")
        store.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("store", __doc__)
    p.add_argument("--seconds", type=float, default=3.0, help="each measurement's length")
    p.add_argument("--writers", default="1,8,64", help="concurrent writers, comma-separated")
    postgres_options(p)
    args = p.parse_args(argv)
    writers = [int(w) for w in args.writers.split(",")]
    print(
        f"group commit: window {WINDOW_S * 1000:g} ms, at most {MAX_RECORDS} reports a batch; "
        "two committers on PostgreSQL (one statement a batch), one on SQLite"
    )
    pg = postgres(args)
    if pg is not None:
        run("postgresql", pg, writers, args.seconds)
    run("sqlite (WAL)", None, writers, args.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
