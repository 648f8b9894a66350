"""Every index on ``reports`` is there for a named read, and that read's plan uses it, on SQLite
and on PostgreSQL: the table :data:`READS` names, for each index, the reads that need it; each
read runs as the store runs it (its statements captured as they go to the database), and the
statement that reads ``reports`` runs again under ``EXPLAIN QUERY PLAN`` (SQLite) or ``EXPLAIN``
(PostgreSQL), whose plan must name the index. A last test holds the table to the schema: no
index on ``reports`` without a read here (migration 0014 dropped those).

SQLite's plans are those of a store never analyzed (the service runs no ``ANALYZE``): its
planner's own rules. PostgreSQL's are those of a store with statistics (autovacuum analyzes):
the table is seeded with :data:`ROWS` reports, vacuumed and analyzed (an index-only scan
pays for the rows the visibility map does not yet know), and the statement is explained with
``enable_seqscan = off`` set in its transaction (``SET LOCAL``), since a table this small is read
whole otherwise, whatever the indexes.

On PostgreSQL ``reports`` is partitioned by day (migration 0017): an index on it is a
partitioned index, and a plan names the partitions' own indexes (``reports_default_…_idx``), so
an index counts as read when the plan names it or one of its partitions' indexes
(``pg_inherits``). Its unique keys live in ``report_keys`` there, which the reads by id and by
request id read (service/store/report_keys.py; on SQLite a view of ``reports``, so the same
statements read ``uq_reports_id`` and ``uq_reports_identity`` there): on PostgreSQL their
plans name ``report_keys``' primary key and identity index, and ``reports`` has no index on
the id or the identity (migration 0019)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import pytest
from sqlalchemy import event, inspect, text

from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.fleet import exact_table, sink_table
from wai_dispatch.service.store.records import RecordedRefusal, ReportRecord
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters, count, get_report, list_reports, summary
from wai_dispatch.service.store.retention import prune_reports

T0 = 1_796_000_000_000
HOUR = 3_600_000
DAY = 86_400_000
ROWS = 3000
SET, SYMBOLS, RGB = "ab" * 32, "11" * 32, "e1" * 32
REFUSED = "dispatch_unit_absent"


def rec(i: int) -> ReportRecord:
    """The ``i``-th seeded report: 50 sinks, two hours and a half, every fifth refused, every
    third at the exact tier, every hundredth a run report's decode."""
    ran = i % 5 != 0
    exact = i % 3 == 0
    run = f"run-{i // 100}" if i % 100 == 7 else None
    return ReportRecord(
        id=f"00000000-0000-0000-0000-{i:012d}",
        request_id=f"req-{i:08d}",
        created_ms=T0 + i * (5 * HOUR // 2 // ROWS),
        sink=f"sink-{i % 50:02d}",
        role="primary",
        capability="wai.neural.bmshj2018",
        set_digest=SET,
        symbols_digest=SYMBOLS,
        rgb_digest=RGB if ran else None,
        needed="decode-equivalence" if exact else "none",
        path_ran=("cpu/wai-ops/integer" if exact else "cpu/onnx-runtime/float") if ran else None,
        tier=("decode-equivalence" if exact else "none") if ran else None,
        outcome="decoded" if ran else "refused",
        duration_ms=1.0,
        placement={"npu": 0, "gpu": 0, "cpu": 3, "unknown": 0} if ran else {},
        refusals=() if ran else (RecordedRefusal("npu/model-runtime/float", REFUSED),),
        report={"i": i},
        source="sink" if run else "service",
        run_report=run,
        request_digest=None if run else "a1" * 32,
    )


def _retry(store: ReportStore) -> None:
    """A retried request (its identity stored under another id): the store answers with the
    first decode's id, found by request id (``bulk.stored_ids``)."""
    first = rec(10)
    again = ReportRecord(**{**vars(first), "id": "ffffffff-0000-0000-0000-000000000010"})
    assert store.record([again]) == [first.id]


def _count(store: ReportStore, filters: Filters) -> int:
    with store.engine.connect() as conn:
        return count(conn, filters)


WINDOW = Filters(since_ms=T0 + HOUR - HOUR // 20, until_ms=T0 + 2 * HOUR + HOUR // 20)


class Read(NamedTuple):
    name: str  # where it is
    run: Callable[[ReportStore], Any]  # the read, as the service runs it
    statement: str  # a regular expression picking its statement that reads reports


#: index → the reads that need it.
READS: dict[str, list[Read]] = {
    "pk_reports": [
        Read(
            "retention: delete a batch by seq (retention.prune_reports)",
            lambda s: prune_reports(s, T0 + HOUR, batch=100),
            r"^DELETE FROM reports WHERE reports\.seq IN",
        ),
    ],
    "uq_reports_id": [
        Read(
            "a report by its id (GET /v1/reports/{id}: reports.get_report)",
            lambda s: get_report(s, rec(42).id, None),
            r"FROM reports\s+WHERE reports\.seq IN \(SELECT report_keys\.seq",
        ),
    ],
    "uq_reports_identity": [
        Read(
            "a retried request's stored ids, by request id (bulk.stored_ids)",
            _retry,
            r"FROM report_keys\s+WHERE report_keys\.request_id IN",
        ),
        Read(
            "what a request asked, by sink and request id (ReportStore.asked)",
            lambda s: s.asked("sink-10", "req-00000010"),
            r"SELECT reports\.request_digest",
        ),
        Read(
            "the listing filtered by request id (GET /v1/reports?request_id=)",
            lambda s: list_reports(s, Filters(request_id="req-00000042"), limit=5, cursor=None),
            r"FROM reports\s+WHERE reports\.seq IN \(SELECT report_keys\.seq",
        ),
    ],
    "ix_reports_sink_created": [
        Read(
            "one sink's reports, newest first (GET /v1/reports with a sink's token)",
            lambda s: list_reports(s, Filters(sink="sink-07"), limit=5, cursor=None),
            r"FROM reports\s+WHERE reports\.sink =",
        ),
    ],
    "ix_reports_run_report": [
        Read(
            "a run report's decodes (GET /v1/reports?run_report=)",
            lambda s: list_reports(
                s, Filters(sink="sink-07", run_report="run-3"), limit=5, cursor=None
            ),
            r"reports\.run_report =",
        ),
        Read(
            "a run report's decodes, any sink's (GET /v1/reports?run_report= as an operator)",
            lambda s: list_reports(s, Filters(run_report="run-3"), limit=5, cursor=None),
            r"reports\.run_report =",
        ),
    ],
    "ix_reports_exact": [
        Read(
            "the exact tier's table of a window with no whole day (fleet.exact_table's reports)",
            lambda s: exact_table(s, WINDOW),
            r"count\(DISTINCT reports\.rgb_digest\)",
        ),
        Read(
            "the exact tier's table of whole days: its partial days (fleet.exact_table)",
            lambda s: exact_table(s, Filters(since_ms=T0 - DAY - HOUR, until_ms=T0 + HOUR)),
            r"FROM reports\s+WHERE tier = 'decode-equivalence'",
        ),
    ],
    "ix_reports_summary": [
        Read(
            "the summary's partial hours (GET /v1/reports/summary: reports.summary)",
            lambda s: summary(s, WINDOW, bucket_s=3600),
            r"AS bucket, reports\.outcome, reports\.path_ran",
        ),
        Read(
            "the fleet sinks table's partial hours (GET /v1/fleet/sinks: fleet.sink_table)",
            lambda s: sink_table(s, WINDOW, classes={}),
            r"FROM reports\s+WHERE",
        ),
        Read(
            "the listing, newest first (GET /v1/reports: reports.list_reports)",
            lambda s: list_reports(s, Filters(), limit=5, cursor=None),
            r"FROM reports ORDER BY reports\.created_ms DESC",
        ),
        Read(
            "the oldest report's time (reports.count, the listing's total)",
            lambda s: _count(s, Filters(since_ms=T0)),
            r"SELECT min\(reports\.created_ms\)",
        ),
        Read(
            "retention: the oldest reports, a batch (retention.prune_reports)",
            lambda s: prune_reports(s, T0 + HOUR, batch=100),
            r"^SELECT reports\.seq\s+FROM reports\s+WHERE reports\.created_ms <",
        ),
    ],
}

CASES = [(index, read) for index, reads in READS.items() for read in reads]


@contextmanager
def captured(store: ReportStore) -> Iterator[list[tuple[str, Any]]]:
    """The statements (and their parameters) sent to the database meanwhile."""
    seen: list[tuple[str, Any]] = []

    def note(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    engines = [store.engine] if store.write_engine is None else [store.engine, store.write_engine]
    for engine in engines:  # the reports' writes go through their own engine on PostgreSQL
        event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", note)


def plan(store: ReportStore, statement: str, params: Any) -> str:
    """The plan of ``statement`` (rolled back: an explained ``DELETE`` is not run)."""
    with store.engine.connect() as conn, conn.begin() as tx:
        if store.dialect == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
            out = "\n".join(str(r[-1]) for r in rows)
        else:
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            rows = conn.exec_driver_sql("EXPLAIN " + statement, params).all()
            out = "\n".join(str(r[0]) for r in rows)
        tx.rollback()
    return out


@pytest.fixture
def seeded(store: ReportStore) -> ReportStore:
    store.insert([rec(i) for i in range(ROWS)])
    with store.engine.begin() as conn:  # folded, as the aggregator leaves a store at rest
        rollups.fold_all(conn)  # (retention never prunes a report still in the inbox)
    if store.dialect == "postgresql":
        with store.engine.connect() as conn:  # outside a transaction, as autovacuum runs
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "VACUUM ANALYZE reports"
            )
    return store


@pytest.mark.parametrize(("index", "read"), CASES, ids=[f"{i}:{r.name}" for i, r in CASES])
def test_the_read_uses_its_index(seeded: ReportStore, index: str, read: Read) -> None:
    with captured(seeded) as seen:
        read.run(seeded)
    picked = [(sql, p) for sql, p in seen if re.search(read.statement, sql, re.S)]
    assert picked, f"{read.name}: no statement matched; sent: {[s for s, _ in seen]}"
    statement, params = picked[0]
    got = plan(seeded, statement, params)
    assert re.search(_named(seeded, index), got), f"{read.name}:\n{statement}\n{got}"


#: The indexes' names on PostgreSQL where they differ: its unique keys are report_keys', not
#: indexes of ``reports`` (migration 0019).
ON_PG = {"uq_reports_id": "pk_report_keys", "uq_reports_identity": "uq_report_keys_identity"}


def _named(store: ReportStore, index: str) -> str:
    """How ``index`` shows in a plan of ``store``'s: SQLite names the primary key (``seq``,
    its rowid) and a unique constraint's index (``sqlite_autoindex_…``) its own way;
    PostgreSQL names the partitions' indexes of a partitioned one."""
    if store.dialect == "postgresql":
        index = ON_PG.get(index, index)
        with store.engine.connect() as conn:
            parts = conn.execute(
                text(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE i.inhparent = to_regclass(:n)"
                ),
                {"n": index},
            ).scalars()
            names = [index, *parts]
        return rf"\b(using|on) ({'|'.join(map(re.escape, names))})\b"
    if index == "pk_reports":
        return r"\bUSING INTEGER PRIMARY KEY\b"
    if index == "uq_reports_id":
        return r"\bINDEX sqlite_autoindex_reports_\d+ \(id=\?\)"
    return rf"\bINDEX {index}\b"


def test_every_index_on_reports_has_its_read(store: ReportStore) -> None:
    """The schema's indexes on ``reports`` are exactly the table's (the primary key and the
    unique id included; on PostgreSQL, all but the two that are ``report_keys``')."""
    with store.engine.connect() as conn:
        insp = inspect(conn)
        names = {i["name"] for i in insp.get_indexes("reports")}
        names |= {u["name"] for u in insp.get_unique_constraints("reports")}
        names.add(str(insp.get_pk_constraint("reports")["name"] or "pk_reports"))
    if store.dialect == "postgresql":
        assert names == {i for i in READS if i not in ON_PG}
    else:
        assert names == set(READS)
