"""Run-report counts from their roll-ups (service/store/rollups.py), on SQLite and
PostgreSQL: after run reports accepted and refused, from sinks with a class and without, over
several hours, a resubmission and a twin of one, the roll-ups' totals equal the rows'; the
compliance summary's and the fleet sinks table's counts, for windows on and off the hours,
equal counts over ``run_reports``; the migration fills the roll-ups from the rows stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from wai_dispatch.service.governance import parse_run_report
from wai_dispatch.service.store import policies as policies_mod
from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.fleet import sink_table
from wai_dispatch.service.store.policies import PolicyStore, governance_summary, submit
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.reports import Filters

ROOT = Path(__file__).resolve().parents[3]
H = 3_600_000
T0 = 1_796_000_000_000 - 1_796_000_000_000 % H  # an hour's start


def _run(i: int, sink: str, digest: str) -> tuple[Any, bytes]:
    example = json.loads((ROOT / "docs" / "examples" / "run-report.json").read_text())
    decodes = [{**d, "set_digest": digest} for d in example["decodes"]]
    obj = {**example, "id": f"run-{i}", "sink": sink, "decodes": decodes}
    body = json.dumps(obj).encode()
    return parse_run_report(json.loads(body)), body


def _fill(store: ReportStore, monkeypatch: pytest.MonkeyPatch) -> PolicyStore:
    """Forty run reports over five hours, a third refused (a set the class does not allow),
    from two kiosks and a sink no class names; each submitted twice (the second replayed)."""
    policies = PolicyStore(store)
    policies.set((ROOT / "docs" / "examples" / "policy.yaml").read_text(), by="t", now_ms=T0)
    for i in range(40):
        at = T0 + i * (5 * H // 40) + 7  # not on the hours
        monkeypatch.setattr(policies_mod, "_now", lambda at=at: at)
        sink = ("kiosk-01", "kiosk-02", "elsewhere")[i % 3]
        run, body = _run(i, sink, "a" * 64 if i % 3 else "c" * 64)
        _, replayed = submit(store, policies, run, body, sink=sink)
        assert not replayed
        _, replayed = submit(store, policies, run, body, sink=sink)  # a retry: stored once
        assert replayed
    return policies


def _raw(store: ReportStore, lo: int | None, hi: int | None, by: str) -> dict[Any, int]:
    where = (
        " AND ".join(
            [
                *([] if lo is None else [f"received_ms >= {lo}"]),
                *([] if hi is None else [f"received_ms < {hi}"]),
            ]
        )
        or "1 = 1"
    )
    with store.engine.connect() as conn:
        got = conn.execute(
            text(f"SELECT {by}, accepted, count(*) FROM run_reports WHERE {where} GROUP BY 1, 2")
        ).all()
    return {(k, bool(a)): int(n) for k, a, n in got}


WINDOWS = [
    (None, None),
    (T0, T0 + 5 * H),
    (T0 + H // 3, T0 + 4 * H + 17),
    (T0 + 10, T0 + 20),
    (T0 + 2 * H + 5, None),
    (None, T0 + 3 * H - 1),
]


def test_run_report_counts_from_the_rollups_equal_the_rows(
    store: ReportStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    policies = _fill(store, monkeypatch)
    with store.engine.connect() as conn:
        total = conn.execute(text("SELECT sum(n) FROM run_report_rollups")).scalar_one()
        rows = conn.execute(text("SELECT count(*) FROM run_reports")).scalar_one()
        assert int(total) == int(rows) == 40  # the resubmissions counted nothing
        for lo, hi in WINDOWS:
            for by, col in (("class", "sink_class"), ("sink", "sink")):
                got = rollups.run_counts(conn, by, since_ms=lo, until_ms=hi)  # type: ignore[arg-type]
                assert {k: n for k, (n, _) in got.items()} == _raw(store, lo, hi, col)
    for lo, hi in WINDOWS:
        raw = _raw(store, lo, hi, "sink_class")
        summary = governance_summary(
            store, policies, since_ms=lo, until_ms=hi, sink_class=None, sink=None
        )
        for entry in summary["classes"]:
            assert entry["runs_accepted"] == raw.get((entry["class"], True), 0)
            assert entry["runs_refused"] == raw.get((entry["class"], False), 0)
        assert summary["refused_total"] == sum(n for (_, a), n in raw.items() if not a)
        by_sink = _raw(store, lo, hi, "sink")
        table = sink_table(store, Filters(since_ms=lo, until_ms=hi), classes={}, limit=500)
        for row in table["items"]:
            assert row["runs_accepted"] == by_sink.get((row["sink"], True), 0)
            assert row["runs_refused"] == by_sink.get((row["sink"], False), 0)


def test_the_rebuild_fills_the_rollups_from_the_rows(
    store: ReportStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store, monkeypatch)
    with store.engine.begin() as conn:
        before = conn.execute(text("SELECT * FROM run_report_rollups ORDER BY 1, 2, 3, 4")).all()
        conn.execute(text("DELETE FROM run_report_rollups"))
        rollups.rebuild_runs(conn)
        after = conn.execute(text("SELECT * FROM run_report_rollups ORDER BY 1, 2, 3, 4")).all()
    assert after == before and len(before) > 5
