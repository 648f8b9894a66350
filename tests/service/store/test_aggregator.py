"""The roll-ups off the acknowledgement path, on SQLite and PostgreSQL: writers put each report
in the inbox and never touch the roll-ups; a fold killed (SIGKILL) after its writes, before its
commit, leaves the inbox as it was, and the next fold makes the roll-ups (``sink_hours`` and
``sink_days`` with their decodes among them) equal to the counts recomputed in Python from the
reports themselves, and to their rebuild; a fold in another process skips the batch one
holds (PostgreSQL); every reader is exact while the inbox holds reports, folded in part or not
at all; 64 writers through group commit beside a folding aggregator spool nothing on SQLite;
``/metrics`` gives the inbox's depth and its oldest report's age; retention moves the roll-ups'
horizon only between folds (PostgreSQL)."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.fleet import sink_table
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.records import UNITS, ReportRecord
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters, count, summary
from wai_dispatch.service.store.retention import cutoff, prune_rollups
from wai_dispatch.service.store.spool import Spool

ROOT = Path(__file__).resolve().parents[3]


def _sibling(name: str) -> Any:
    """A test module beside this one (the suites are imported by path: importlib mode)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_r = _sibling("test_rollups")  # its random reports, filters and recount of a summary
DAY, NOW, draw, random_filters, recount = _r.DAY, _r.NOW, _r.draw, _r.random_filters, _r.recount
SINKS = ("s1", "s2", "s3")  # draw's

#: Stands in the fold's transaction (its writes made, not committed) until it is killed.
HELD_FOLD = textwrap.dedent(
    """
    import sys, time
    from wai_dispatch.service.store import rollups
    from wai_dispatch.service.store.report_store import ReportStore

    store = ReportStore(sys.argv[1])
    with store.engine.connect() as conn:
        rollups.begin_fold(conn)
        print(rollups.fold(conn, int(sys.argv[2])), flush=True)
        time.sleep(600)
    """
)


def tables(store: ReportStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every report roll-up as stored, each sorted (``exact_group_days`` too)."""
    with store.engine.connect() as conn:
        every = (*rollups.TABLES, rollups.GROUP_DAYS)
        return {t.name: sorted(tuple(r) for r in conn.execute(select(t))) for t in every}


def expected(records: list[ReportRecord]) -> dict[str, list[tuple[Any, ...]]]:
    """What every report roll-up holds for ``records``, counted in Python (the roll-ups' own
    description, rollups.py: not the SQL that folds them)."""
    fleet: dict[tuple[Any, ...], list[int]] = {}
    per_sink: dict[tuple[Any, ...], list[int]] = {}
    hours: dict[tuple[Any, ...], list[int]] = {}
    days: dict[tuple[Any, ...], list[int]] = {}
    pairs: dict[tuple[Any, ...], list[int]] = {}
    sink_hours: dict[tuple[Any, ...], list[int]] = {}
    sink_days: dict[tuple[Any, ...], list[int]] = {}
    exact_days: dict[tuple[Any, ...], list[int]] = {}
    exact_groups: dict[tuple[Any, ...], list[Any]] = {}
    for r in records:
        key = (
            r.sink,
            rollups.hour_of(r.created_ms),
            r.capability,
            r.set_digest or "",
            r.path_ran or "",
            r.tier or "",
            r.outcome,
            rollups.codes_of(f.code for f in r.refusals),
        )
        sums = [1, *(r.placement.get(u, 0) for u in UNITS)]
        for into, k in ((fleet, tuple(key[1:])), (per_sink, tuple(key))):
            slot = into.setdefault(k, [0] * len(sums))
            for i, v in enumerate(sums):
                slot[i] += v
        digest = r.set_digest or ""
        for into, start in ((hours, rollups.hour_of), (days, rollups.day_of)):
            slot = into.setdefault((start(r.created_ms), r.sink, digest), [0, 0, 0])
            slot[0] += 1
            slot[1] += r.outcome == "refused"
            slot[2] = max(slot[2], r.created_ms)
        slot = pairs.setdefault((r.sink, digest), [0])
        slot[0] = max(slot[0], r.created_ms)
        # every set together, with the decodes: a decode's first report (role primary)
        for into, start in ((sink_hours, rollups.hour_of), (sink_days, rollups.day_of)):
            slot = into.setdefault((start(r.created_ms), r.sink), [0, 0, 0, 0])
            slot[0] += 1
            slot[1] += r.outcome == "refused"
            slot[2] += r.role == "primary"
            slot[3] = max(slot[3], r.created_ms)
        # the exact tier: its decodes with a set and a symbols digest, per group and day
        if r.tier != "decode-equivalence" or not r.set_digest or not r.symbols_digest:
            continue
        group = (r.set_digest, r.symbols_digest)
        day = (rollups.day_of(r.created_ms), r.rgb_digest or "", r.sink, r.request_digest or "")
        slot = exact_days.setdefault((*group, *day), [0, 0])
        slot[0] += 1
        slot[1] = max(slot[1], r.created_ms)
        both = exact_groups.setdefault(group, [0, 0, None, None])
        both[0] += 1
        both[1] = max(both[1], r.created_ms)
        if r.rgb_digest:
            both[2] = min(both[2] or r.rgb_digest, r.rgb_digest)
            both[3] = max(both[3] or r.rgb_digest, r.rgb_digest)
    # per set and day: the groups whose latest decode is of that day
    group_days: dict[tuple[Any, ...], list[int]] = {}
    for (digest, _), (_, last, _, _) in exact_groups.items():
        group_days.setdefault((digest, rollups.day_of(last)), [0])[0] += 1
    every = (fleet, per_sink, hours, days, pairs, sink_hours, sink_days, exact_days, exact_groups)
    return {
        t.name: sorted((*k, *v) for k, v in got.items())
        for t, got in zip((*rollups.TABLES, rollups.GROUP_DAYS), (*every, group_days), strict=True)
    }


def inbox(store: ReportStore) -> int:
    with store.engine.connect() as conn:
        return rollups.inbox(conn)[0]


def held_fold(store: ReportStore, limit: int) -> subprocess.Popen[str]:
    """A process folding up to ``limit`` reports, held inside its transaction; once this
    returns, its writes are made (it said how many)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", HELD_FOLD, store.url, str(limit)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip().isdigit(), line
    return child


@pytest.mark.slow
def test_a_fold_killed_midway_rolls_back_and_the_next_counts_every_report_once(
    store: ReportStore,
) -> None:
    rng = random.Random(41)
    # a fallback's report among them: counted in sink_hours' and sink_days' reports, not decodes
    records = [
        replace(r, role="fallback") if i % 4 == 3 else r
        for i, r in enumerate(draw(rng, i) for i in range(3000))
    ]
    store.insert(records[:1000])
    Aggregator(store, start=False).drain()  # some already folded: the kill must not touch them
    store.insert(records[1000:])
    assert inbox(store) == 2000
    child = held_fold(store, 10_000)  # the whole inbox, written, not committed
    try:
        f = Filters(since_ms=NOW - 3 * DAY + 1234, until_ms=NOW)
        assert summary(store, f, bucket_s=3600) == recount(records, f, 3600)  # meanwhile: exact
        if store.dialect == "postgresql":
            # another process's fold skips the rows this one holds (FOR UPDATE SKIP LOCKED)
            assert Aggregator(store, start=False).fold_once() == 0
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert child.stdout is not None
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 30  # PostgreSQL ends the dead client's transaction
    while inbox(store) != 2000 or tables(store) != expected(records[:1000]):
        assert time.monotonic() < deadline, "the killed fold was not rolled back"
        time.sleep(0.1)
    agg = Aggregator(store, start=False, batch=700)  # the next fold, in batches
    assert agg.drain() == 2000 and inbox(store) == 0
    assert tables(store) == expected(records)  # every report counted once
    with store.engine.begin() as conn:  # and as the rebuild from the reports counts them
        rollups.rebuild(conn)
        rollups.rebuild_activity(conn)
        rollups.rebuild_pairs(conn)
        rollups.rebuild_sinks(conn)
        rollups.rebuild_exact(conn)
        rollups.rebuild_group_days(conn)
    assert tables(store) == expected(records)


@pytest.mark.slow
def test_readers_are_exact_with_reports_in_the_inbox(store: ReportStore) -> None:
    """The summary, the total and the sinks table read the roll-ups and the reports still in
    the inbox (rollups.current): the same answers as a recount, folded in part or not at all,
    and the writers wrote no roll-up row."""
    rng = random.Random(43)
    records = [draw(rng, i) for i in range(400)]
    store.insert(records)
    assert tables(store) == expected([])  # nothing counted on the acknowledgement path
    agg = Aggregator(store, start=False, batch=150)
    for step in range(3):  # nothing folded, 150 folded, 300 folded
        for _ in range(12):
            f = random_filters(rng)
            bucket_s = rng.choice((3600, 86400, 900))
            assert summary(store, f, bucket_s=bucket_s) == recount(records, f, bucket_s), f
            with store.engine.connect() as conn:
                assert count(conn, f) == recount(records, f, 3600)["reports"], f
        lo = NOW - 2 * DAY + 777
        table = sink_table(store, Filters(since_ms=lo), classes={}, limit=10)
        want = {s: sum(r.sink == s and r.created_ms >= lo for r in records) for s in SINKS}
        assert {r["sink"]: r["reports"] for r in table["items"]} == want
        assert agg.fold_once() == (150 if step < 2 else 100)
    assert tables(store) == expected(records)


def test_sixty_four_writers_and_a_folding_aggregator_spool_nothing(
    store: ReportStore, tmp_path: Path
) -> None:
    """Group commit with 64 writers while the aggregator folds every 20 ms: no writer waits
    past SQLite's busy timeout ("database is locked": its records spooled), every report is
    stored, and once the inbox is folded the roll-ups count each once."""
    spool = Spool(tmp_path / "spool", 1 << 24)
    recorder = Recorder(store, spool, commit_window_s=0.002)
    agg = Aggregator(store, interval_s=0.02, batch=500)
    stored: list[ReportRecord] = []
    lock = threading.Lock()
    start = threading.Barrier(64)

    def writer(k: int) -> None:
        rng = random.Random(k)
        start.wait()
        for j in range(12):
            rec = draw(rng, 0, span_ms=DAY)
            rec = replace(rec, id=str(uuid.uuid4()), request_id=f"w{k}-{j}")
            recorder.record([rec])
            with lock:
                stored.append(rec)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    recorder.close()
    agg.close()
    assert spool.size() == 0  # nothing spooled: the store took every request
    assert store.count() == len(stored) == 64 * 12
    assert agg.folded > 0  # it folded while the writers wrote
    Aggregator(store, start=False).drain()
    assert tables(store) == expected(stored)


def test_folds_side_by_side_move_each_groups_day_once(store: ReportStore) -> None:
    """Four aggregators folding one inbox at once, in small batches, the same few exact-tier
    groups in every batch: ``exact_group_days`` ends as counted from the groups. (This holds
    the result; the race rollups.GROUP_DAYS_LOCK closes on PostgreSQL did not show here with
    the lock taken out, 2026-12-08.)"""
    rng = random.Random(43)
    records = [draw(rng, i, span_ms=5 * DAY) for i in range(1200)]
    store.insert(records)
    folders = [Aggregator(store, start=False, batch=40) for _ in range(4)]
    threads = [threading.Thread(target=a.drain) for a in folders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert inbox(store) == 0
    assert tables(store) == expected(records)


def test_the_lag_is_the_inbox_depth_and_its_oldest_reports_age(store: ReportStore) -> None:
    agg = Aggregator(store, start=False)
    assert agg.lag() == (0, 0.0)
    store.insert([draw(random.Random(1), i) for i in range(5)])
    depth, age = agg.lag()
    assert (depth, age) == (5, 0.0)  # first seen now
    time.sleep(0.2)
    depth, age = agg.lag()
    assert depth == 5 and age >= 0.2
    assert agg.drain() == 5
    assert agg.lag() == (0, 0.0)
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(rollups.INBOX)).scalar_one() == 0


def test_a_readers_conditions_never_walk_the_reports_for_the_inbox(
    report_store: ReportStore,
) -> None:
    """SQLite's plan of a reader's statement over rollups.current: the roll-up by its index, the
    inbox's reports by their seq (rowid), never a scan or an index walk of ``reports`` (which a
    reader's condition on the sink would pick, testing each row against the inbox)."""
    with report_store.engine.connect() as conn:
        for table in rollups.TABLES:
            c = rollups.current(conn, table).c
            time_col = c.start_ms if "start_ms" in c else c.hour_ms if "hour_ms" in c else c.last_ms
            query = (
                select(func.count()).where(c.sink == "s1", time_col >= 5)
                if "sink" in c
                else select(func.count()).where(time_col >= 5, c.capability == "x")
                if "capability" in c
                else select(func.count()).where(time_col >= 5, c.set_digest == "x")
            )
            comp = query.compile(conn)
            params = tuple(comp.params[k] for k in comp.positiontup or ())
            plan = [r[3] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {comp}", params)]
            on_reports = [p for p in plan if " reports " in f"{p} "]
            assert on_reports == ["SEARCH reports USING INTEGER PRIMARY KEY (rowid=?)"], plan
            assert any(p.startswith(f"SEARCH {table.name} ") for p in plan), plan


@pytest.mark.slow
def test_retention_moves_the_horizon_only_between_folds(postgres_url: str) -> None:
    """PostgreSQL: a pass that prunes roll-ups waits for a fold under way (it holds the
    horizon ``FOR SHARE``) before it moves the horizon, and the folds after it count no report
    of a pruned hour. (On SQLite there is no such case to test: the fold holds the one writer
    lock, so the pass cannot start.)"""
    store = ReportStore(postgres_url)
    store.migrate()
    try:
        _horizon_between_folds(store)
    finally:
        store.dispose()


def _horizon_between_folds(store: ReportStore) -> None:
    rng = random.Random(5)
    records = [draw(rng, i, span_ms=40 * DAY) for i in range(300)]
    store.insert(records)
    horizon = cutoff(35, NOW)
    assert horizon is not None
    child = held_fold(store, 10_000)  # its writes made, not committed
    moved = threading.Event()

    def prune_pass() -> None:
        prune_rollups(store, horizon)
        moved.set()

    pass_ = threading.Thread(target=prune_pass)
    pass_.start()
    try:
        assert not moved.wait(2), "the pass moved the horizon under a fold"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert child.stdout is not None
        child.stdout.close()
    pass_.join(30)
    assert moved.is_set()
    Aggregator(store, start=False).drain()  # the killed fold's reports, folded after the move
    with store.engine.connect() as conn:
        assert rollups.horizon_of(conn) == horizon
    kept = [r for r in records if rollups.hour_of(r.created_ms) >= horizon]
    assert len(kept) < len(records)
    assert tables(store) == expected(kept)
