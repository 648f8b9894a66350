"""SQLite's writers: one transaction a report from 64 threads at once (the recorder without
group commit) is never "database is locked": no request spools, and every report is stored
once. Every write transaction on a SQLite store takes the store's write lock first
(service/store/report_store.py), so the threads queue in the process instead of polling
SQLite's lock against its busy timeout."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.service.store.test_group_commit import request_records
from wai_dispatch.service.store import report_store as report_store_module
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.spool import Spool

WRITERS = 64
EACH = 30


def test_64_sqlite_writers_one_transaction_a_report_never_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's busy timeout cut to 50 ms: the writers of one process never reach it (they
    # queue on the store's write lock), where polling SQLite's lock 64 at a time did
    monkeypatch.setattr(report_store_module, "SQLITE_BUSY_TIMEOUT_S", 0.05)
    report_store = ReportStore(f"sqlite:///{tmp_path / 'reports.db'}")
    report_store.migrate()
    aggregator = Aggregator(report_store)  # folding meanwhile, as in the service
    recorder = Recorder(report_store, Spool(tmp_path / "spool", max_bytes=1 << 24), retry_s=60)
    downs: list[str] = []
    down = recorder._down

    def spooled(records: list[ReportRecord], exc: StoreDown) -> list[ReportRecord]:
        downs.append(str(exc))
        return down(records, exc)

    recorder._down = spooled  # type: ignore[method-assign]
    start = threading.Barrier(WRITERS)

    def writer(k: int) -> None:
        start.wait()
        for j in range(EACH):
            recorder.record(request_records(f"w{k}-{j}", 1))

    try:
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not downs
        assert recorder.pending_bytes() == 0
    finally:
        recorder.close()
        aggregator.close()
        report_store.dispose()
    with report_store.engine.connect() as conn:
        stored = conn.execute(
            text("SELECT request_id, count(*) FROM reports GROUP BY request_id")
        ).all()
    assert sorted(stored) == sorted((f"w{k}-{j}", 1) for k in range(WRITERS) for j in range(EACH))


def test_only_writes_take_the_write_lock() -> None:
    from wai_dispatch.service.store.report_store import writes

    assert writes("INSERT INTO reports (id) VALUES (?) ON CONFLICT DO NOTHING RETURNING seq")
    assert writes("  update rollups SET n = n + 1")
    assert writes("DELETE FROM report_inbox WHERE seq <= ?")
    assert writes("CREATE INDEX ix ON reports (sink)")
    assert writes("WITH gone AS (SELECT seq FROM report_inbox) DELETE FROM report_inbox")
    assert not writes("SELECT id FROM reports WHERE request_id = ?")
    assert not writes("WITH s AS (SELECT sink, count(*) AS n FROM reports) SELECT * FROM s")
    assert not writes("PRAGMA journal_mode")


def test_a_dashboard_read_held_open_does_not_hold_up_writers(
    report_store: ReportStore, tmp_path: Path
) -> None:
    recorder = Recorder(report_store, Spool(tmp_path / "spool", max_bytes=1 << 20), retry_s=60)
    try:
        with report_store.engine.connect() as conn:  # a CTE read, its connection left open
            conn.execute(text("WITH s AS (SELECT count(*) AS n FROM reports) SELECT n FROM s"))
            done: list[list[ReportRecord]] = []
            t = threading.Thread(target=lambda: done.append(recorder.record(request_records("r"))))
            t.start()
            t.join(5)
            assert done and recorder.store_up
    finally:
        recorder.close()
