"""``reports`` partitioned by day on PostgreSQL (service/store/partitions.py, migration 0017),
one table on SQLite, with the same answers: retention drops whole partitions on PostgreSQL and
deletes rows on SQLite, leaving the same reports, refusals and roll-ups; a report of a day
without a partition lands in the default partition and is kept and counted (and moves into its
day's partition when that is made); a report sent again is stored once whatever day it
carries, its key unique across partitions; the migration converts a populated table and back."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
from _reports import report
from alembic import command
from alembic.config import Config
from sqlalchemy import func, select, text

from wai_dispatch.service.store import partitions, rollups
from wai_dispatch.service.store.models import RefusalRow
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import MIGRATIONS, ReportStore
from wai_dispatch.service.store.reports import Filters, list_reports, summary
from wai_dispatch.service.store.retention import prune_reports

DAY = rollups.DAY_MS
D0 = 20_400 * DAY  # a UTC day's start (2025-11-07): days D0 .. D0 + 3 DAY are seeded


def rec(i: int, created_ms: int, *, request_id: str | None = None) -> ReportRecord:
    """Report ``i`` of sink ``s{i % 3}``; every fourth one refused (one refusal, none ran)."""
    ran = i % 4 != 0
    refused = [] if ran else [{"path": "npu/model-runtime/float", "code": "dispatch_unit_absent"}]
    asked = {} if request_id is None else {"request_id": request_id}
    return report(i, f"s{i % 3}", created_ms, ran=ran, refusals=refused, **asked)


def seeded() -> list[ReportRecord]:
    """Six reports an hour-ish over four days, and two before them (no partition of theirs)."""
    out = [rec(i, D0 + i * (4 * DAY // 100) + 17) for i in range(100)]
    return [*out, rec(100, D0 - 5 * DAY + 3), rec(101, D0 - DAY // 2)]


def with_days(store: ReportStore) -> None:
    """On PostgreSQL, the partitions of the four seeded days (as ``ensure`` makes them)."""
    if store.dialect == "postgresql":
        with store.engine.begin() as conn:
            assert len(partitions.ensure(conn, D0, ahead=3)) == 4


def ids(store: ReportStore) -> list[str]:
    page = list_reports(store, Filters(), limit=1000, cursor=None)
    return sorted(str(x["id"]) for x in page["items"])


def refusals(store: ReportStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(RefusalRow)).scalar_one())


def tables(store: ReportStore) -> set[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT relname FROM pg_class WHERE relname ~ '^reports_(d[0-9]{8}|default)$'")
        )
        return {str(r) for r in rows.scalars()}


def keys(store: ReportStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM report_keys")).scalar_one())


def test_retention_drops_whole_partitions_with_the_answers_of_row_deletes(
    store: ReportStore,
) -> None:
    with_days(store)
    records = seeded()
    assert store.insert(records) == len(records)
    with store.engine.begin() as conn:
        rollups.fold_all(conn)  # retention keeps a report the inbox still holds
    whole = summary(store, Filters(), bucket_s=86400)
    cut = D0 + 2 * DAY  # two whole days and the two reports before them go
    kept = [r for r in records if r.created_ms >= cut]
    assert prune_reports(store, cut, batch=7) == len(records) - len(kept)
    assert ids(store) == sorted(r.id for r in kept)
    assert store.count() == len(kept)
    assert refusals(store) == sum(len(r.refusals) for r in kept)
    assert summary(store, Filters(), bucket_s=86400) == whole  # the roll-ups still count all
    assert summary(store, Filters(since_ms=cut), bucket_s=3600, rollups=False)["reports"] == len(
        kept
    )
    if store.dialect == "postgresql":  # the days' tables dropped, their keys deleted
        days = {partitions.day_name(D0 // DAY + k) for k in range(4)}
        assert days - tables(store) == {partitions.day_name(D0 // DAY + k) for k in (0, 1)}
        assert keys(store) == len(kept)
    # a report sent again for a pruned day is stored anew (as once its row was deleted)
    assert store.insert([records[0]]) == 1


def test_a_partition_detached_and_not_dropped_is_finished_by_the_next_pass(
    store: ReportStore,
) -> None:
    """A pass stopped after detaching a day's partition (a crash) left its table: the next
    pass deletes its refusals and keys and drops it."""
    if store.dialect != "postgresql":
        return  # SQLite has no partitions: the previous test holds its answers
    with_days(store)
    records = seeded()
    store.insert(records)
    with store.engine.begin() as conn:
        rollups.fold_all(conn)
        conn.execute(text(f"ALTER TABLE reports DETACH PARTITION {partitions.day_name(D0 // DAY)}"))
    first = [r for r in records if D0 <= r.created_ms < D0 + DAY]
    assert store.count() == len(records) - len(first)
    assert prune_reports(store, D0) == len(first) + 2  # that table's, and the default's two
    assert partitions.day_name(D0 // DAY) not in tables(store)
    assert keys(store) == len(records) - len(first) - 2
    assert refusals(store) == sum(len(r.refusals) for r in records if r.created_ms >= D0 + DAY)


def test_a_report_of_a_day_without_a_partition_is_kept_and_counted(store: ReportStore) -> None:
    """A report far ahead of the partitions made (a clock gone wrong) or before the oldest
    lands in the default partition: stored, listed, counted; when its day's partition is made
    it moves there, still stored once."""
    ahead = rec(1, D0 + 40 * DAY + 5)
    old = rec(2, 3 * DAY + 9)
    assert store.insert([ahead, old]) == 2
    with store.engine.begin() as conn:
        assert rollups.fold_all(conn) == 2
    assert ids(store) == sorted([ahead.id, old.id])
    assert summary(store, Filters(), bucket_s=86400)["reports"] == 2
    if store.dialect == "postgresql":
        with store.engine.begin() as conn:
            held = conn.execute(text(f"SELECT id FROM {partitions.DEFAULT} ORDER BY id"))
            assert list(held.scalars()) == sorted([ahead.id, old.id])
            assert partitions.ensure(conn, ahead.created_ms, ahead=0) == [
                partitions.day_name(ahead.created_ms // DAY)
            ]
            moved = conn.execute(
                text(f"SELECT id FROM {partitions.day_name(ahead.created_ms // DAY)}")
            )
            assert list(moved.scalars()) == [ahead.id]
    assert ids(store) == sorted([ahead.id, old.id])
    assert store.insert([ahead, old]) == 0
    assert summary(store, Filters(), bucket_s=86400)["reports"] == 2


def test_a_report_sent_again_is_stored_once_whatever_day_it_carries(store: ReportStore) -> None:
    """The same ids resent with another day (another partition), and the same identities under
    new ids on other days, from eight writers at once: each report stored once, counted once;
    a retried request answers with the first decode's ids."""
    with_days(store)
    first = [rec(i, D0 + (i % 4) * DAY + i) for i in range(40)]
    assert store.insert(first) == 40
    moved = [replace(r, created_ms=r.created_ms + DAY) for r in first]  # same id, next day
    renamed = [  # same identity, a new id, two days on
        replace(r, id=f"ffffffff-0000-4000-8000-{i:012d}", created_ms=r.created_ms + 2 * DAY)
        for i, r in enumerate(first)
    ]
    fresh = [rec(1000 + i, D0 + (i % 4) * DAY + 5) for i in range(40)]
    got: list[Any] = []

    def send(k: int) -> None:
        batch = [moved, renamed, fresh, first][k % 4]
        got.append(store.record(batch))

    threads = [threading.Thread(target=send, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8
    for answer in got:  # each id answered is the one stored for its identity
        assert set(answer) <= {r.id for r in first + fresh}
    assert store.count() == 80
    assert ids(store) == sorted(r.id for r in first + fresh)
    with store.engine.begin() as conn:
        rollups.fold_all(conn)
    assert summary(store, Filters(), bucket_s=86400)["reports"] == 80
    assert summary(store, Filters(), bucket_s=86400, rollups=False)["reports"] == 80
    if store.dialect == "postgresql":
        assert keys(store) == 80


def test_the_migration_converts_a_populated_table_and_back(store: ReportStore) -> None:
    records = seeded()
    store.insert(records)
    before = ids(store), refusals(store)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0015")
        if store.dialect == "postgresql":
            kind = conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'reports'"))
            assert kind.scalar_one() == "r"  # one table again, its unique keys back
            assert conn.execute(text("SELECT to_regclass('report_keys')")).scalar() is None
    assert (ids(store), refusals(store)) == before
    store.migrate()
    assert (ids(store), refusals(store)) == before
    assert store.insert(records) == 0  # the keys came along
    if store.dialect == "postgresql":
        with store.engine.connect() as conn:
            kind = conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'reports'"))
            assert kind.scalar_one() == "p"
        assert keys(store) == len(records)
        # a partition for each day the reports had
        assert {partitions.day_name(r.created_ms // DAY) for r in records} <= tables(store)


@pytest.mark.slow  # the lock waited for, partitions.LOCK_WAIT
def test_a_partition_a_long_read_holds_waits_for_the_next_pass(store: ReportStore) -> None:
    """Detaching waits for the exclusive lock at most ``partitions.LOCK_WAIT`` (the writers
    queue behind it): a read holding ``reports`` meanwhile leaves the partition for the next
    pass, which drops it."""
    if store.dialect != "postgresql":
        return  # SQLite deletes rows: no exclusive lock
    with_days(store)
    records = seeded()
    store.insert(records)
    with store.engine.begin() as conn:
        rollups.fold_all(conn)
    first = [r for r in records if D0 <= r.created_ms < D0 + DAY]
    with store.engine.connect() as reader, reader.begin():
        reader.execute(text("SELECT count(*) FROM reports")).scalar_one()
        assert prune_reports(store, D0 + DAY) == 2  # the default's two only
        assert partitions.day_name(D0 // DAY) in tables(store)
    assert prune_reports(store, D0 + DAY) == len(first)
    assert partitions.day_name(D0 // DAY) not in tables(store)
    assert store.count() == len(records) - len(first) - 2
