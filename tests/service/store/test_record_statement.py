"""The batch's one statement (service/store/report_store.py ``record``; on PostgreSQL sent
outside any transaction block, the statement its own transaction): a report sent twice in one
batch and again in a later batch is stored once, with its refusals, inbox row and key once,
and every copy answered with the first one's id; on PostgreSQL a pooled writing connection the
server has dropped (its backend terminated, as a restart does) fails nothing: the batch is
sent again on a fresh connection, stored once."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from _reports import report
from sqlalchemy import text

from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore

T0 = 1_796_000_000_000
REFUSED = [{"path": "npu/model-runtime/float", "code": "dispatch_unit_absent"}]


def request_records(request_id: str) -> list[ReportRecord]:
    """One request's two reports (a refused primary, a decoded fallback), fresh ids."""
    return [
        replace(
            report(0, "a", T0, ran=k == 1, refusals=[] if k else REFUSED, request_id=request_id,
                   ordinal=k),
            id=str(uuid.uuid4()),
        )
        for k in (0, 1)
    ]  # fmt: skip


def _count(store: ReportStore, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_report_resent_in_the_batch_and_across_batches_is_stored_once(
    store: ReportStore,
) -> None:
    first = request_records("req-1")
    twin = [replace(r, id=str(uuid.uuid4())) for r in first]  # the request retried
    other = request_records("req-2")
    got = store.record([*first, *twin, *other, *first])
    assert got == [r.id for r in first] * 2 + [r.id for r in other] + [r.id for r in first]
    later = [replace(r, id=str(uuid.uuid4())) for r in first]
    assert store.record([*later, *first]) == [r.id for r in first] * 2
    assert _count(store, "reports") == 4
    assert _count(store, "report_refusals") == 2
    assert _count(store, "report_inbox") == 4
    assert _count(store, "report_keys") == 4


@pytest.mark.postgres
def test_a_writing_connection_the_server_dropped_fails_nothing(postgres_url: str) -> None:
    store = ReportStore(postgres_url)
    store.migrate()
    try:
        first = request_records("req-1")
        assert store.record(first) == [r.id for r in first]  # a writing connection pooled
        with store.engine.connect() as conn:
            dropped = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        assert dropped >= 1
        again = request_records("req-2")
        assert store.record([*again, *first]) == [r.id for r in again] + [r.id for r in first]
        assert _count(store, "reports") == 4
        assert _count(store, "report_keys") == 4
    finally:
        store.dispose()
