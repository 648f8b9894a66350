"""Decodes per sink class (service/store/class_decodes.py), on SQLite and PostgreSQL: over
service decodes with one report and with two (the fallback tried), and decodes sinks reported
in run reports, from sinks in two classes and sinks no class names, over three days, the
decodes per class (unclassified included) and those no path ran equal a count of the stored
reports in SQL for windows on and off the hours and days, with half the reports still in the
aggregator's inbox (read through rollups.current) and with all folded; ``sink_hours`` and
``sink_days`` folded from the inbox equal their rebuild from the reports, and the migration
fills them from the reports stored."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect, select, text

from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.class_decodes import decodes_by_class
from wai_dispatch.service.store.records import RecordedRefusal, ReportRecord
from wai_dispatch.service.store.report_store import MIGRATIONS, ReportStore

HOUR = 3_600_000
DAY = 24 * HOUR
NOW = 1_796_001_234_567
CLASSES = {"kiosk-1": "kiosk", "kiosk-2": "kiosk", "cam-1": "camera", "cam-9": "camera"}
SINKS = ["kiosk-1", "kiosk-2", "cam-1", "lone-1", "lone-2"]  # cam-9 never decodes


def _record(i: int, at: int, sink: str, role: str, ran: bool, **kw: Any) -> ReportRecord:
    return ReportRecord(
        id=f"00000000-0000-4000-8000-{i:012d}",
        request_id=kw.pop("request_id", f"req-{i}"),
        created_ms=at,
        sink=sink,
        role=role,  # type: ignore[arg-type]
        capability="wai.neural.bmshj2018",
        set_digest="ab" * 32,
        symbols_digest=None,
        rgb_digest=None,
        needed="none",
        path_ran="cpu/onnx-runtime/float" if ran else None,
        tier="none" if ran else None,
        outcome="decoded" if ran else "refused",
        duration_ms=1.0,
        placement={"npu": 0, "gpu": 0, "cpu": 3, "unknown": 0} if ran else {},
        refusals=()
        if ran
        else (RecordedRefusal("npu/model-runtime/float", "dispatch_unit_absent"),),
        report={"kind": "wai-neural-dispatch/1", "i": i},
        **kw,
    )


def decodes(rng: random.Random, n: int) -> list[ReportRecord]:
    """``n`` decodes over the three days before :data:`NOW`: a third with the fallback tried
    (the primary refused, the fallback decoded or refused), a third one report, a third a
    sink's run report's decode (role primary, source sink)."""
    out: list[ReportRecord] = []
    for d in range(n):
        at, sink, kind = NOW - rng.randrange(3 * DAY), rng.choice(SINKS), d % 3
        i = len(out)
        if kind == 0:
            out.append(_record(i, at, sink, "primary", False, request_id=f"d{d}"))
            fallback = _record(i + 1, at, sink, "fallback", rng.random() < 0.7, request_id=f"d{d}")
            out.append(replace(fallback, ordinal=1))
        elif kind == 1:
            out.append(_record(i, at, sink, "primary", rng.random() < 0.8, request_id=f"d{d}"))
        else:
            out.append(
                _record(
                    i,
                    at,
                    sink,
                    "primary",
                    rng.random() < 0.9,
                    request_id=f"run-{d}",
                    source="sink",
                    run_report=f"run-{d}",
                )
            )
    return out


def counted_in_sql(store: ReportStore, lo: int | None, hi: int | None) -> dict[Any, Any]:
    """Per class: decodes (reports with role primary) and those of them no path ran (decodes
    none of whose reports decoded), counted over ``reports`` in SQL."""
    where = (
        " AND ".join(
            [
                *([] if lo is None else [f"created_ms >= {lo}"]),
                *([] if hi is None else [f"created_ms < {hi}"]),
            ]
        )
        or "1 = 1"
    )
    sql = (
        "SELECT sink, request_id, max(CASE WHEN role = 'primary' THEN 1 ELSE 0 END),"
        " max(CASE WHEN outcome = 'decoded' THEN 1 ELSE 0 END)"
        f" FROM reports WHERE {where} GROUP BY sink, request_id"
    )
    out: dict[str | None, list[int]] = {}
    with store.engine.connect() as conn:
        for sink, _, first, ran in conn.execute(text(sql)):
            slot = out.setdefault(CLASSES.get(sink), [0, 0])
            slot[0] += int(first)
            slot[1] += int(first) * (1 - int(ran))
    return {k: tuple(v) for k, v in out.items() if v[0]}


WINDOWS = [
    (None, None),
    (NOW - 3 * DAY, None),
    (NOW - 2 * DAY - (NOW % DAY), NOW - (NOW % DAY)),  # two whole days
    (NOW - 50 * HOUR - 17, NOW - 3 * HOUR + 5),  # partial hours, whole hours, a whole day
    (NOW - 5 * HOUR, NOW - 5 * HOUR + 60_000),  # inside an hour
    (NOW - NOW % HOUR - 30 * HOUR, None),  # on the hour
]


def test_decodes_per_class_equal_a_count_of_the_reports(store: ReportStore) -> None:
    records = decodes(random.Random(3), 600)
    for i in range(0, len(records), 50):
        store.insert(records[i : i + 50])
        if i == 250:  # the first 300 decodes folded, the rest still in the inbox
            assert Aggregator(store, start=False).drain() > 0
    assert sum(r.role == "fallback" for r in records) == 200  # reports: 800, decodes: 600
    with store.engine.connect() as conn:
        assert rollups.inbox(conn)[0] > 0
    for folded in (False, True):
        if folded:
            Aggregator(store, start=False).drain()
        _check_windows(store)


def _check_windows(store: ReportStore) -> None:
    with store.engine.connect() as conn:
        for lo, hi in WINDOWS:
            want = counted_in_sql(store, lo, hi)
            got = decodes_by_class(conn, CLASSES, since_ms=lo, until_ms=hi)
            assert got == want, (lo, hi)
            assert None in got and got[None][0] > 0  # the unclassified sinks' decodes
            assert decodes_by_class(
                conn, CLASSES, since_ms=lo, until_ms=hi, sink_class="kiosk"
            ) == {k: v for k, v in want.items() if k == "kiosk"}
            one = decodes_by_class(conn, CLASSES, since_ms=lo, until_ms=hi, sink="lone-1")
            assert set(one) <= {None}
        total = decodes_by_class(conn, CLASSES, since_ms=None, until_ms=None)
        assert sum(n for n, _ in total.values()) == 600
        assert decodes_by_class(conn, CLASSES, since_ms=None, until_ms=None, sink_class="x") == {}
        assert decodes_by_class(conn, {}, since_ms=None, until_ms=None) == {
            None: (600, sum(v[1] for v in total.values()))
        }


def _tables(store: ReportStore) -> list[list[tuple[Any, ...]]]:
    with store.engine.connect() as conn:
        return [
            sorted(tuple(r) for r in conn.execute(select(t)))
            for t in (rollups.SINK_HOURS, rollups.SINK_DAYS)
        ]


def test_sink_activity_rebuilt_and_migrated_equals_what_was_written(store: ReportStore) -> None:
    store.insert(decodes(random.Random(4), 300))
    assert not any(_tables(store))  # the writers count nothing: the fold does
    Aggregator(store, start=False).drain()
    written = _tables(store)
    assert all(written)
    with store.engine.begin() as conn:
        rollups.rebuild_sinks(conn)
    assert _tables(store) == written
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0011")
        assert not inspect(conn).has_table("sink_days")
    store.migrate()
    assert _tables(store) == written
