"""Per-hour roll-ups and retention, on SQLite and PostgreSQL: the summary read from roll-ups
(whole hours) and reports (the edges) equals a recount of the reports themselves over random
reports, windows, buckets and filters; a replayed report is counted once; the roll-ups rebuilt
from the reports equal the ones written as they arrived (the migration that adds them fills
them so); pruning deletes reports in batches, whole hours, never a roll-up, without holding up
inserts; a report late for an hour whose roll-ups were pruned brings none of them back."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import event, func, insert, inspect, select

from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.models import RefusalRow, ReportRow
from wai_dispatch.service.store.records import UNITS, RecordedRefusal, ReportRecord
from wai_dispatch.service.store.report_store import MIGRATIONS, ReportStore
from wai_dispatch.service.store.reports import Filters, list_reports, summary
from wai_dispatch.service.store.retention import BATCH, Pruner, cutoff, prune, report_cutoff

HOUR = 3_600_000
DAY = 24 * HOUR
NOW = 1_796_001_234_567  # a fixed "now", inside an hour
PATHS = [None, "npu/model-runtime/float", "cpu/onnx-runtime/float", "gpu/wgsl/integer"]
CODES = ["dispatch_unit_absent", "dispatch_tier_refused", "dispatch_not_placed"]
SETS = [None, "ab" * 32, "cd" * 32]


def draw(rng: random.Random, i: int, *, span_ms: int = 3 * DAY, end_ms: int = NOW) -> ReportRecord:
    path = rng.choice(PATHS)
    codes = [rng.choice(CODES) for _ in range(rng.choice((0, 0, 1, 2, 3)))]
    placement = {u: rng.randrange(0, 30) for u in UNITS} if path else {}
    return ReportRecord(
        id=f"00000000-0000-4000-8000-{i:012d}",
        request_id=f"req-{i}",
        created_ms=end_ms - rng.randrange(span_ms),
        sink=rng.choice(("s1", "s2", "s3")),
        role="primary",
        capability=rng.choice(("wai.neural.bmshj2018", "wai.neural.int_synth")),
        set_digest=rng.choice(SETS),
        # the exact tier's key parts, from ``i`` (the draws above stay as they were): a few
        # payloads, some decoded to two RGB digests, some RGB unknown
        symbols_digest=f"{i % 5:064x}" if path else None,
        rgb_digest=f"{i * 7 % 3:064x}" if path and i % 4 else None,
        request_digest=f"{i % 3:064x}" if i % 2 else None,
        needed="none",
        path_ran=path,
        tier=rng.choice(("none", "decode-equivalence")) if path else None,
        outcome="decoded" if path else "refused",
        duration_ms=1.0,
        placement=placement,
        refusals=tuple(RecordedRefusal("npu/model-runtime/float", c) for c in codes),
        report={"kind": "wai-neural-dispatch/1", "i": i},
    )


def recount(records: list[ReportRecord], f: Filters, bucket_s: int) -> dict[str, Any]:
    """The summary, counted in Python from the records themselves."""
    chosen = [
        r
        for r in records
        if (f.capability is None or r.capability == f.capability)
        and (f.path is None or r.path_ran == (None if f.path == "none" else f.path))
        and (f.reason is None or any(x.code == f.reason for x in r.refusals))
        and (f.tier is None or r.tier == f.tier)
        and (f.sink is None or r.sink == f.sink)
        and (f.set is None or r.set_digest == f.set)
        and (f.outcome is None or r.outcome == f.outcome)
        and (f.since_ms is None or r.created_ms >= f.since_ms)
        and (f.until_ms is None or r.created_ms < f.until_ms)
        and (f.sinks is None or r.sink in f.sinks)
    ]
    by_path: dict[tuple[str | None, str | None], int] = {}
    refusals: dict[str, int] = {}
    over: dict[int, dict[str, int]] = {}
    ops = [0] * len(UNITS)
    for r in chosen:
        by_path[(r.path_ran, r.tier)] = by_path.get((r.path_ran, r.tier), 0) + 1
        for x in r.refusals:
            refusals[x.code] = refusals.get(x.code, 0) + 1
        start = r.created_ms - r.created_ms % (bucket_s * 1000)
        over.setdefault(start, {})[r.outcome] = over.get(start, {}).get(r.outcome, 0) + 1
        for i, u in enumerate(UNITS):
            ops[i] += r.placement.get(u, 0)
    paths = sorted(by_path.items(), key=lambda kv: (-kv[1], kv[0][0] or "", kv[0][1] or ""))
    total = sum(ops)
    ran = [r.path_ran.split("/")[0] for r in chosen if r.path_ran]
    return {
        "reports": len(chosen),
        "by_path": [{"path": p, "tier": t, "count": c} for (p, t), c in paths],
        "refusals": dict(sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0]))),
        "placement": {u: (ops[i] / total if total else 0.0) for i, u in enumerate(UNITS)},
        "decoded": len(ran),
        "decode_share": {u: (ran.count(u) / len(ran) if ran else 0.0) for u in UNITS},
        "bucket_s": bucket_s,
        "over_time": [{"start_ms": k, **v} for k, v in sorted(over.items())],
    }


def random_filters(rng: random.Random) -> Filters:
    lo = NOW - rng.randrange(4 * DAY) if rng.random() < 0.8 else None
    if rng.random() < 0.2 and lo is not None:
        lo -= lo % HOUR  # exactly on an hour
    hi = (lo or NOW - 4 * DAY) + rng.randrange(4 * DAY) if rng.random() < 0.8 else None
    if rng.random() < 0.2 and hi is not None:
        hi -= hi % HOUR
    one = rng.random
    return Filters(
        capability="wai.neural.int_synth" if one() < 0.1 else None,
        path=rng.choice(["none", *PATHS[1:]]) if one() < 0.2 else None,
        reason=rng.choice(CODES) if one() < 0.2 else None,
        tier="none" if one() < 0.1 else None,
        sink=rng.choice(("s1", "s2")) if one() < 0.2 else None,
        set=rng.choice(SETS[1:]) if one() < 0.1 else None,
        outcome=rng.choice(("decoded", "refused")) if one() < 0.1 else None,
        since_ms=lo,
        until_ms=hi,
        sinks=("s1", "s3") if one() < 0.1 else None,
    )


def rollup_tables(store: ReportStore) -> list[list[tuple[Any, ...]]]:
    """Both report roll-ups as stored, once the inbox is folded into them (the aggregator's
    work, service/store/aggregator.py)."""
    with store.engine.begin() as conn:
        rollups.fold_all(conn)
        return [
            sorted(tuple(r) for r in conn.execute(select(t))) for t in (rollups.FLEET, rollups.SINK)
        ]


@pytest.mark.slow
def test_summary_from_rollups_equals_a_recount_of_the_reports(store: ReportStore) -> None:
    rng = random.Random(17)
    records = [draw(rng, i) for i in range(600)]
    at = 0
    while at < len(records):  # batches of any size, each replayed in part (a spool replay)
        n = rng.randrange(1, 40)
        assert store.insert(records[at : at + n]) == len(records[at : at + n])
        assert store.insert(records[max(0, at - 5) : at + n]) == 0
        at += n
    used = 0
    for _ in range(120):
        f = random_filters(rng)
        bucket_s = rng.choice((3600, 3600, 7200, 86400, 86400, 900, 60))
        want = recount(records, f, bucket_s)
        assert summary(store, f, bucket_s=bucket_s) == want, (f, bucket_s)
        assert summary(store, f, bucket_s=bucket_s, rollups=False) == want, (f, bucket_s)
        used += bucket_s % 3600 == 0
    assert used > 60  # most of the cases read roll-ups
    fleet, per_sink = rollup_tables(store)
    assert sum(r[7] for r in fleet) == sum(r[8] for r in per_sink) == len(records)


def test_rebuilt_rollups_equal_the_ones_written_as_reports_arrived(store: ReportStore) -> None:
    rng = random.Random(5)
    store.insert([draw(rng, i) for i in range(300)])
    written = rollup_tables(store)
    with store.engine.begin() as conn:
        assert rollups.rebuild(conn) == len(written[0])
    assert rollup_tables(store) == written


def test_the_migration_fills_rollups_from_the_reports_stored(store: ReportStore) -> None:
    """Reports stored before 0004 (written here without roll-ups) are counted when it runs."""
    rng = random.Random(9)
    records = [draw(rng, i) for i in range(200)]
    store.insert(records)
    want = rollup_tables(store)
    cfg = Config()  # back to 0003 (the later revisions' downgrades; the reports stay)
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
        assert not inspect(conn).has_table("report_rollups")
    store.migrate()
    assert rollup_tables(store) == want


def test_pruning_deletes_whole_days_of_reports_in_batches_and_keeps_rollups(
    store: ReportStore,
) -> None:
    rng = random.Random(3)
    records = [draw(rng, i, span_ms=40 * DAY) for i in range(400)]
    store.insert(records)
    whole = summary(store, Filters(), bucket_s=86400)
    written = rollup_tables(store)
    before = report_cutoff(30, NOW)
    assert before == (NOW - 30 * DAY) - (NOW - 30 * DAY) % DAY  # whole days on every store
    old = [r for r in records if r.created_ms < before]
    assert len(old) > 50
    done = prune(store, report_days=30, rollup_days=0, now_ms=NOW, batch=7)
    assert done.reports_before_ms == before
    assert (done.reports, done.rollup_hours, done.rollups_before_ms) == (len(old), 0, None)
    assert store.count() == len(records) - len(old)
    with store.engine.connect() as conn:
        refusals = conn.execute(select(func.count()).select_from(RefusalRow)).scalar_one()
        oldest = conn.execute(select(func.min(ReportRow.created_ms))).scalar_one()
    assert refusals == sum(len(r.refusals) for r in records if r.created_ms >= before)
    assert oldest >= before
    assert rollup_tables(store) == written  # the roll-ups still count every report
    assert summary(store, Filters(), bucket_s=86400) == whole
    kept = [r for r in records if r.created_ms >= before]
    f = Filters(since_ms=before - 5 * DAY + 1234, until_ms=NOW)  # reads raw rows at both edges
    assert summary(store, f, bucket_s=3600, rollups=False) == recount(kept, f, 3600)
    # roll-ups go only by their own retention, whole hours
    again = prune(store, report_days=30, rollup_days=35, now_ms=NOW)
    assert again.reports == 0 and again.rollups_before_ms == cutoff(35, NOW)
    hours = {rollups.hour_of(r.created_ms) for r in records}
    assert again.rollup_hours == len({h for h in hours if h < cutoff(35, NOW)})
    fleet, per_sink = rollup_tables(store)
    assert min(r[0] for r in fleet) >= cutoff(35, NOW)
    assert min(r[1] for r in per_sink) >= cutoff(35, NOW)
    with store.engine.connect() as conn:  # the per-sink activity: whole hours, whole days
        first_hour = conn.execute(select(func.min(rollups.SINK_HOURS.c.start_ms))).scalar_one()
        first_day = conn.execute(select(func.min(rollups.SINK_DAYS.c.start_ms))).scalar_one()
    assert first_hour >= cutoff(35, NOW) and first_day + DAY > cutoff(35, NOW)
    assert prune(store, report_days=0, rollup_days=0, now_ms=NOW).reports_before_ms is None


def every_rollup(store: ReportStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every report roll-up as stored (the inbox not folded)."""
    with store.engine.connect() as conn:
        return {t.name: sorted(tuple(r) for r in conn.execute(select(t))) for t in rollups.TABLES}


def hour_total(store: ReportStore, hour_ms: int) -> int:
    """The reports the fleet roll-up holds for the hour starting at ``hour_ms``."""
    with store.engine.connect() as conn:
        q = select(func.coalesce(func.sum(rollups.FLEET.c.n), 0))
        return int(conn.execute(q.where(rollups.FLEET.c.hour_ms == hour_ms)).scalar_one())


def test_a_report_late_for_a_pruned_hour_brings_no_rollup_of_it_back(store: ReportStore) -> None:
    """Pruning roll-ups moves their horizon to the first hour kept; a report of an earlier hour
    stored after that (a sink's late run report, a spool replayed) is counted in no roll-up,
    neither while it waits in the inbox (the readers leave it out, as the fold will) nor once
    folded; a late report of an hour kept is counted as any other."""
    rng = random.Random(9)
    records = [draw(rng, i, span_ms=40 * DAY) for i in range(300)]
    store.insert(records)
    horizon = cutoff(35, NOW)
    assert horizon is not None
    with store.engine.connect() as conn:
        assert rollups.horizon_of(conn) == 0  # none pruned yet
    pruned = prune(store, report_days=30, rollup_days=35, now_ms=NOW)
    assert pruned.rollup_hours > 0
    with store.engine.connect() as conn:
        assert rollups.horizon_of(conn) == horizon
    kept = every_rollup(store)
    whole = summary(store, Filters(), bucket_s=86400)
    late = replace(draw(rng, 1000), created_ms=horizon - 5 * HOUR + 17)
    store.insert([late])
    assert summary(store, Filters(), bucket_s=86400) == whole  # in the inbox: left out
    with store.engine.begin() as conn:
        assert rollups.fold_all(conn) == 1
    assert every_rollup(store) == kept  # folded: no row of its hour came back
    for table in rollups.TABLES:
        start = table.c.get("hour_ms", table.c.get("start_ms"))
        if start is not None and table.name.endswith(("hours", "rollups", "rollups_sink")):
            with store.engine.connect() as conn:
                first = conn.execute(select(func.min(start))).scalar_one()
            assert first is None or first >= horizon, table.name
    # the same report an hour after the horizon: counted
    on_time = replace(late, id="00000000-0000-4000-8000-000000009999", request_id="req-on-time")
    before = hour_total(store, horizon + HOUR)
    store.insert([replace(on_time, created_ms=horizon + HOUR + 17)])
    with store.engine.begin() as conn:
        assert rollups.fold_all(conn) == 1
    assert summary(store, Filters(), bucket_s=86400) != whole
    assert hour_total(store, horizon + HOUR) == before + 1


def _bulk(store: ReportStore, n: int, *, days_ago: int) -> None:
    """``n`` reports ``days_ago`` days old, inserted as one bulk statement (no roll-ups)."""
    rows = [
        {
            "seq": 1_000_000 + i,
            "id": f"b-{i}",
            "request_id": f"r-{i}",
            "created_ms": NOW - days_ago * DAY,
            "sink": "s",
            "role": "primary",
            "capability": "c",
            "set_digest": None,
            "symbols_digest": None,
            "rgb_digest": None,
            "needed": "none",
            "path_ran": None,
            "tier": None,
            "outcome": "refused",
            "duration_ms": 1.0,
            "placement_npu": 0,
            "placement_gpu": 0,
            "placement_cpu": 0,
            "placement_unknown": 0,
            "report": "{}",
            "source": "service",
            "run_report": None,
        }
        for i in range(n)
    ]
    refusals = [{"report_seq": r["seq"], "position": 0, "path": "p", "code": "x"} for r in rows]
    with store.engine.begin() as conn:
        conn.execute(insert(ReportRow), rows)
        conn.execute(insert(RefusalRow), refusals)


def test_inserts_go_on_while_the_pruner_deletes(store: ReportStore) -> None:
    """The service's thread prunes in short transactions, one batch each: decodes' inserts
    interleave with them and none fails (on SQLite a writer waiting past the busy timeout is a
    store that is down, and ``insert`` raises), and every report inserted meanwhile stays. The
    batches are counted by the commits the pruner makes, never by a clock."""
    _bulk(store, 20_000, days_ago=40)
    rng = random.Random(1)
    fresh = [draw(rng, i, span_ms=HOUR, end_ms=int(time.time() * 1000)) for i in range(150)]
    commits: list[int] = []
    pruning = threading.current_thread().ident

    def on_commit(conn: object) -> None:
        if threading.current_thread().ident != pruning:
            commits.append(1)

    event.listen(store.engine, "commit", on_commit)
    pruner = Pruner(
        store, report_days=30, rollup_days=0, interval_s=3600, first_after_s=0.0, pause_s=0.002
    )
    try:
        for rec in fresh:
            assert store.insert([rec]) == 1  # StoreDown past SQLite's busy timeout
        deadline = time.monotonic() + 60
        while pruner.passes == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        pruner.close()
        event.remove(store.engine, "commit", on_commit)
    assert pruner.last is not None and pruner.last.reports == 20_000
    assert store.count() == len(fresh)
    # 20,000 reports in batches of BATCH: one short transaction each (and the request errors')
    assert len(commits) >= 20_000 // BATCH, len(commits)


def test_a_replayed_report_is_counted_once(store: ReportStore, tmp_path: Path) -> None:
    from wai_dispatch.service.store.spool import Spool

    rng = random.Random(2)
    records = [draw(rng, i) for i in range(20)]
    store.insert(records[:12])  # stored, then the spool is replayed (a crash before truncating)
    spool = Spool(tmp_path / "spool", 1 << 20)
    try:
        spool.append([r.to_json() for r in records])
        spool.replay(lambda batch: store.insert([ReportRecord.from_json(o) for o in batch]))
    finally:
        spool.close()
    fleet, per_sink = rollup_tables(store)
    assert sum(r[7] for r in fleet) == sum(r[8] for r in per_sink) == store.count() == 20
    f = replace(Filters(), since_ms=NOW - 3 * DAY)
    assert summary(store, f, bucket_s=3600) == recount(records, f, 3600)


def test_list_total_from_rollups_equals_a_recount(store: ReportStore) -> None:
    """``GET /v1/reports?total=true`` counts from the roll-ups (whole hours), the reports only
    for the edges and the oldest stored hour: the same total as a count of the reports, also
    once retention has pruned hours whose counts the roll-ups keep."""
    rng = random.Random(29)
    records = [draw(rng, i) for i in range(300)]
    assert store.insert(records) == 300
    for _ in range(60):
        f = random_filters(rng)
        got = list_reports(store, f, limit=1, cursor=None, with_total=True)["total"]
        assert got == recount(records, f, 3600)["reports"], f
    assert (
        list_reports(store, Filters(request_id="req-7"), limit=1, cursor=None, with_total=True)[
            "total"
        ]
        == 1
    )
    prune(store, report_days=2, rollup_days=0, now_ms=NOW)  # whole hours, as retention does
    before = NOW - 2 * DAY + 1234  # then an hour pruned in part (a pass cut short)
    with store.engine.begin() as conn:
        conn.execute(ReportRow.__table__.delete().where(ReportRow.created_ms < before))
    kept = [r for r in records if r.created_ms >= before]
    for _ in range(40):
        f = random_filters(rng)
        got = list_reports(store, f, limit=1, cursor=None, with_total=True)["total"]
        assert got == recount(kept, f, 3600)["reports"], f
