"""``python -m wai_dispatch.tools.bench_store``: acknowledged reports per second into the report
store through the service's own :class:`Recorder` (each writer thread makes one decode's
records with :func:`records_for` and waits until they are durable), the service's
:class:`Aggregator` folding them into the roll-ups meanwhile, at 1, 8 and 64 writers:
group commit beside one transaction per report (the anchor: group commit off), on SQLite and
PostgreSQL. Prints both rates and their ratio (group ÷ single: above 1 is faster), each
mode's p50 and p99 ``record`` latency, the transactions group commit made, and the rows and
bytes a report adds. The report is a decode on ``cpu/onnx-runtime/float`` with the NPU refused.

On PostgreSQL, in the same run and database, the anchor is PostgreSQL's own ``COPY`` (binary) of
the same rows into the same migrated tables: each writer its own connection, :data:`COPY_BATCH`
reports (their keys, ``report_keys``, and their refusals) a transaction, alone ("COPY") and
with what the project's writers add beside them, a ``report_inbox`` row a report
("COPY+inbox"); the last line gives group commit at the most writers as a fraction of ``COPY``
alone."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import multiprocessing.queues
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import NullPool, create_engine, text

from wai_dispatch.dispatch import Report
from wai_dispatch.service.store import bulk_pg
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.recorder import PG_COMMITTERS, Recorder
from wai_dispatch.service.store.records import ReportRecord, records_for
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.spool import Spool
from wai_dispatch.tools.harness import (
    database,
    for_seconds,
    latencies,
    parser,
    postgres,
    postgres_options,
)

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
#: Reports a ``COPY`` transaction: group commit's largest batch.
COPY_BATCH = MAX_RECORDS
_COPY_REPORTS = (
    f"COPY reports (seq, {', '.join(c for c, _ in bulk_pg.COLS)}) FROM STDIN (FORMAT BINARY)"
)
_COPY_REFUSALS = (
    "COPY report_refusals (report_seq, position, path, code) FROM STDIN (FORMAT BINARY)"
)
_COPY_INBOX = "COPY report_inbox (seq) FROM STDIN (FORMAT BINARY)"
# reports is partitioned by day on PostgreSQL, its unique keys in report_keys (migration 0017),
# with each report's seq (0019)
_COPY_KEYS = (
    "COPY report_keys (id, request_id, sink, ordinal, created_ms, seq) FROM STDIN (FORMAT BINARY)"
)
_BLOCKS = itertools.count(1)  # COPY's seq blocks, above any the sequence hands out here


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
    store: ReportStore, folder: Path, writers: int, seconds: float, group: bool, processes: int = 1
) -> tuple[float, float, float, int]:
    """Reports/s acknowledged, median and p99 ``record`` ms, and transactions (group commit's
    batches; with it off, one a report); with ``processes`` above 1, ``writers`` shared by that
    many processes at once (:func:`_in_processes`), their reports summed."""
    if min(processes, writers) > 1:  # at least one writer a process
        procs = min(processes, writers)
        n, took, lat, batches = _in_processes(store.url, folder, writers, seconds, group, procs)
    else:
        n, took, lat, batches = _record_for(store, folder, writers, seconds, group)
    ms = latencies(lat)
    return n / took, ms["p50_ms"], ms["p99_ms"], batches if group else n


def _record_for(
    store: ReportStore, folder: Path, writers: int, seconds: float, group: bool
) -> tuple[int, float, list[float], int]:
    """``writers`` threads recording for ``seconds``: the reports acknowledged, the seconds
    taken, each ``record``'s seconds, and group commit's batches."""
    spool = Spool(folder / f"spool-{writers}-{int(group)}", max_bytes=1 << 30)
    aggregator = Aggregator(store)  # the roll-ups folded meanwhile, as in the service
    recorder = Recorder(
        store,
        spool,
        retry_s=60,
        commit_window_s=WINDOW_S if group else None,
        commit_max=MAX_RECORDS,
    )
    lat: list[list[float]] = [[] for _ in range(writers)]

    def writer(k: int, go: Callable[[], object], stop: threading.Event) -> None:
        mine = lat[k]
        go()
        n = 0
        while not stop.is_set():
            records = _one(f"sink-{(k * 7919 + n) % 1000:04d}")
            t0 = time.perf_counter()
            recorder.record(records)
            mine.append(time.perf_counter() - t0)
            n += 1

    took = for_seconds(writer, writers, seconds)
    batches = recorder.group.batches if recorder.group else 0
    recorder.close()
    aggregator.close()
    aggregator.drain()  # the next run starts with the inbox empty, not folding this one's
    if spool.size():
        print(f"    warning: {spool.size()} bytes spooled (the store did not take them)")
    return sum(map(len, lat)), took, [x for xs in lat for x in xs], batches


def _in_processes(
    url: str, folder: Path, writers: int, seconds: float, group: bool, processes: int
) -> tuple[int, float, list[float], int]:
    """:func:`_record_for` in ``processes`` processes at once against the database at ``url``
    (as a service's worker processes or replicas write to one PostgreSQL), ``writers`` shared
    among them: the reports summed, the longest run's seconds, every
    ``record``'s seconds, the batches summed."""
    ctx = mp.get_context("spawn")  # no fork of a process running threads
    ready = ctx.Barrier(processes)
    out: mp.queues.Queue[tuple[int, float, list[float], int]] = ctx.Queue()
    each = [writers // processes + (i < writers % processes) for i in range(processes)]
    procs = [
        ctx.Process(
            target=_child,
            args=(url, folder / f"process-{i}", w, seconds, group, ready, out),
            daemon=True,
        )
        for i, w in enumerate(each)
    ]
    for proc in procs:
        proc.start()
    got = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join()
    return (
        sum(g[0] for g in got),
        max(g[1] for g in got),
        [x for g in got for x in g[2]],
        sum(g[3] for g in got),
    )


def _child(
    url: str,
    folder: Path,
    writers: int,
    seconds: float,
    group: bool,
    ready: Any,
    out: Any,
) -> None:
    """One process of :func:`_in_processes`: its own store, recorder and aggregator."""
    folder.mkdir(parents=True, exist_ok=True)
    store = ReportStore(url)
    ready.wait()  # every process ready: their measurements overlap
    out.put(_record_for(store, folder, writers, seconds, group))
    store.dispose()


def copy_rate(store: ReportStore, writers: int, seconds: float, with_inbox: bool) -> float:
    """Reports/s PostgreSQL's own binary ``COPY`` takes into the same tables: each writer its
    own connection, :data:`COPY_BATCH` reports a transaction, each report a fresh id, identity
    and seq (the rows :func:`_one` makes otherwise); ``with_inbox``: each report's seq copied
    into ``report_inbox`` too, as the project's writers add it."""
    like = _one("sink-0000")[0]
    engine = create_engine(store.engine.url, poolclass=NullPool)
    done = [0] * writers

    def writer(k: int, go: Callable[[], object], stop: threading.Event) -> None:
        with engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            go()
            while not stop.is_set():
                seq = (1 << 40) + next(_BLOCKS) * COPY_BATCH
                now = int(time.time() * 1000)
                recs = [
                    replace(
                        like,
                        id=str(uuid.uuid4()),
                        request_id=str(uuid.uuid4()),
                        sink=f"sink-{(k * 7919 + i) % 1000:04d}",
                        created_ms=now,
                    )
                    for i in range(COPY_BATCH)
                ]
                with conn.begin(), raw.cursor() as cur:
                    with cur.copy(_COPY_REPORTS) as cp:
                        cp.set_types(["bigint", *(t for _, t in bulk_pg.COLS)])
                        for i, row in enumerate(bulk_pg.columns(recs)):
                            cp.write_row((seq + i, *row))
                    with cur.copy(_COPY_KEYS) as cp:
                        cp.set_types(["text", "text", "text", "integer", "bigint", "bigint"])
                        for i, rec in enumerate(recs):
                            key = (rec.id, rec.request_id, rec.sink, rec.ordinal, rec.created_ms)
                            cp.write_row((*key, seq + i))
                    with cur.copy(_COPY_REFUSALS) as cp:
                        cp.set_types(["bigint", "integer", "text", "text"])
                        for i, rec in enumerate(recs):
                            for j, r in enumerate(rec.refusals):
                                cp.write_row((seq + i, j, r.path, r.code))
                    if with_inbox:
                        with cur.copy(_COPY_INBOX) as cp:
                            cp.set_types(["bigint"])
                            for i in range(len(recs)):
                                cp.write_row((seq + i,))
                done[k] += COPY_BATCH

    took = for_seconds(writer, writers, seconds)
    engine.dispose()
    return sum(done) / took


def footprint(store: ReportStore, path: Path | None) -> tuple[float, float]:
    """Rows (reports, refusals; on PostgreSQL, keys) and bytes (tables and indexes; SQLite:
    the file, its WAL checkpointed) per stored report."""
    with store.engine.connect() as conn:
        reports = int(conn.execute(text("SELECT count(*) FROM reports")).scalar_one())
        refusals = int(conn.execute(text("SELECT count(*) FROM report_refusals")).scalar_one())
        if store.dialect == "postgresql":
            refusals += int(conn.execute(text("SELECT count(*) FROM report_keys")).scalar_one())
            size = int(
                conn.execute(
                    text(
                        "SELECT (SELECT sum(pg_total_relation_size(relid)) FROM "
                        "pg_partition_tree('reports')) + pg_total_relation_size("
                        "'report_refusals') + pg_total_relation_size('report_keys')"
                    )
                ).scalar_one()
            )
        else:
            assert path is not None
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            size = os.path.getsize(path)
    return (reports + refusals) / max(reports, 1), size / max(reports, 1)


def run(
    name: str, admin_url: str | None, writers: list[int], seconds: float, processes: int = 1
) -> list[float]:
    """Prints the table of ``name``; returns group commit's and ``COPY``'s reports/s at the
    most writers (PostgreSQL; none on SQLite). ``processes``: the writers shared by that many
    recording processes (PostgreSQL; SQLite's writers take one file lock, so one)."""
    with (
        tempfile.TemporaryDirectory(prefix="wai-bench-store-") as tmp,
        database(admin_url, Path(tmp)) as url,
    ):
        store = ReportStore(url)
        store.migrate()
        pg = admin_url is not None
        procs = processes if pg else 1
        print(f"\n{name}: reports/s acknowledged through Recorder.record, {seconds:g} s each")
        head = ["writers", "single/s", "group/s", "ratio", "single p50/p99 ms"]
        head += ["group p50/p99 ms", "reports/tx"]
        widths = [7, 9, 9, 6, 18, 17, 10]
        if pg:
            head += ["COPY/s", "COPY+inbox/s", "group/COPY"]
            widths += [9, 14, 10]
        print("  " + "  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
        last: list[float] = []
        for n in writers:
            single, s50, s99, _ = measure(store, Path(tmp), n, seconds, False, procs)
            grouped, g50, g99, batches = measure(store, Path(tmp), n, seconds, True, procs)
            per_tx = grouped * seconds / max(batches, 1)
            line = (
                f"  {n:>7}  {single:>9.0f}  {grouped:>9.0f}  {grouped / single:>5.1f}×  "
                f"{s50:>8.2f}/{s99:<9.2f}  {g50:>8.2f}/{g99:<8.2f}  {per_tx:>10.1f}"
            )
            if pg:
                copied = copy_rate(store, n, seconds, with_inbox=False)
                rolled = copy_rate(store, n, seconds, with_inbox=True)
                line += f"  {copied:>9.0f}  {rolled:>14.0f}  {grouped / copied:>10.2f}"
                last = [grouped, copied]
            print(line, flush=True)
        path = None if pg else Path(tmp) / "reports.db"
        rows, size = footprint(store, path)
        print(
            f"  recording processes: {procs} (the writers shared among them, their reports summed)"
        )
        print(f"  rows a report: {rows:.1f}; bytes a report (tables and indexes): {size:,.0f}")
        if pg:
            print(
                f"  COPY: binary, {COPY_BATCH} reports, their keys and their refusals a transaction"
            )
        store.dispose()
        return last


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("store", __doc__)
    p.add_argument("--seconds", type=float, default=3.0, help="each measurement's length")
    p.add_argument("--writers", default="1,8,64", help="concurrent writers, comma-separated")
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="recording processes the writers are shared by, on PostgreSQL (a service's "
        "worker processes or replicas); their acknowledged reports are summed",
    )
    postgres_options(p)
    args = p.parse_args(argv)
    writers = [int(w) for w in args.writers.split(",")]
    print(
        f"group commit: window {WINDOW_S * 1000:g} ms, at most {MAX_RECORDS} reports a batch; "
        f"{PG_COMMITTERS} committers on PostgreSQL (one statement a batch), one on SQLite"
    )
    pg = postgres(args)
    last = run("postgresql", pg, writers, args.seconds, args.processes) if pg is not None else []
    run("sqlite (WAL)", None, writers, args.seconds)
    if not last:
        print("store: the COPY anchor needs PostgreSQL (none measured)")
        return 0
    grouped, copied = last
    print(
        f"store: group commit {grouped:,.0f} reports/s into PostgreSQL at {max(writers)} writers"
        f" = {grouped / copied:.2f} x PostgreSQL's own COPY ({copied:,.0f} reports/s) on the same"
        " tables"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
