"""Reports found by their keys (service/store/report_keys.py, migration 0019): a report by its
id, a request's reports by its request id, what a request asked and a retry's stored ids read
``report_keys`` (a table holding each report's ``seq`` on PostgreSQL, a view of ``reports`` on
SQLite) and answer the same on both stores; the migration goes down (PostgreSQL: ``reports``'
id and identity indexes back, the column gone; SQLite: the view gone) and up again (the column
filled from ``reports``)."""

from __future__ import annotations

from dataclasses import replace

from _reports import report
from alembic import command
from alembic.config import Config
from sqlalchemy import inspect, text

from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import MIGRATIONS, ReportStore
from wai_dispatch.service.store.reports import Filters, get_report, list_reports

T0 = 1_796_000_000_000
ASKED = "a1" * 32


def rec(i: int) -> ReportRecord:
    return report(i, f"s{i % 3}", T0 + i * 60_000, request_id=f"req-{i // 2}", ordinal=i % 2,
                  request_digest=ASKED)  # fmt: skip


def answers(store: ReportStore) -> list[object]:
    """What the reads by key answer for the seeded reports."""
    out: list[object] = []
    for i in (0, 7, 19):
        one = get_report(store, rec(i).id, None)
        out.append((one["id"], one["request_id"]))
        page = list_reports(store, Filters(request_id=f"req-{i // 2}"), limit=10, cursor=None)
        out.append(sorted(str(x["id"]) for x in page["items"]))
        out.append(store.asked(f"s{i % 3}", f"req-{i // 2}"))
        out.append(store.asked("nobody", f"req-{i // 2}"))
    again = replace(rec(7), id="ffffffff-0000-0000-0000-000000000007")  # a retried request
    out.append(store.record([again]))
    return out


def _to(store: ReportStore, revision: str) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        if revision == "head":
            command.upgrade(cfg, revision)
        else:
            command.downgrade(cfg, revision)


def test_the_reads_by_key_answer_after_the_migration_down_and_up(store: ReportStore) -> None:
    store.insert([rec(i) for i in range(20)])
    _to(store, "0018")
    with store.engine.connect() as conn:
        if store.dialect == "postgresql":
            names = {i["name"] for i in inspect(conn).get_indexes("reports")}
            assert {"ix_reports_id", "ix_reports_identity"} <= names
            cols = {c["name"] for c in inspect(conn).get_columns("report_keys")}
            assert "seq" not in cols
        else:
            assert "report_keys" not in inspect(conn).get_view_names()
    _to(store, "head")  # the keys' seq filled from reports
    got = answers(store)
    assert got[0] == (rec(0).id, "req-0")
    assert got[1] == [rec(0).id, rec(1).id]
    assert got[2] == ASKED and got[3] is None
    assert got[-1] == [rec(7).id]  # the first decode's id
    with store.engine.connect() as conn:
        if store.dialect == "postgresql":
            names = {i["name"] for i in inspect(conn).get_indexes("reports")}
            assert not {"ix_reports_id", "ix_reports_identity"} & names
        held = conn.execute(
            text("SELECT count(*) FROM report_keys k JOIN reports r USING (id) WHERE k.seq = r.seq")
        ).scalar_one()
        assert held == 20


def test_a_report_stored_through_the_keys_is_found_by_them(store: ReportStore) -> None:
    store.insert([rec(i) for i in range(6)])
    again = [replace(r, id=r.id.replace("00000000-", "eeeeeeee-", 1)) for r in map(rec, range(6))]
    assert store.record(again) == [rec(i).id for i in range(6)]  # each: the first one's id
    assert store.count() == 6
    assert [get_report(store, rec(i).id, f"s{i % 3}")["id"] for i in range(6)] == [
        rec(i).id for i in range(6)
    ]
