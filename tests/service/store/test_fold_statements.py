"""The roll-ups' fold builds its statements once per dialect, on SQLite and PostgreSQL: later
folds bind their batch and horizon to the same statements (built anew, a fold of a few reports
spent most of its CPU making them, beside the service's decodes: docs/performance.md), and
each fold still counts exactly its own batch."""

from __future__ import annotations

import importlib.util
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.report_store import ReportStore


def _draw() -> Any:
    """test_rollups' random report (the suites are imported by path: importlib mode)."""
    path = Path(__file__).with_name("test_rollups.py")
    spec = importlib.util.spec_from_file_location("test_rollups", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.draw


def test_folds_reuse_their_statements_and_count_each_batch_once(
    store: ReportStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    draw, rng = _draw(), random.Random(7)
    built: list[object] = []
    keyed = rollups.keyed

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs.get("horizon"))
        return keyed(*args, **kwargs)

    monkeypatch.setattr(rollups, "_FOLDS", {})
    monkeypatch.setattr(rollups, "keyed", counted)
    total = 0
    for batch in (3, 5, 1):
        records = [
            replace(draw(rng, total + k), id=f"00000000-0000-4000-8000-{total + k:012d}")
            for k in range(batch)
        ]
        store.record(records)
        total += batch
        with store.engine.connect() as conn:
            rollups.begin_fold(conn)
            assert rollups.fold(conn) == batch
            conn.commit()
    assert len(built) == 1  # the first fold built them; the others bound their batch
    with store.engine.connect() as conn:
        counted_reports = conn.execute(select(func.sum(rollups.FLEET.c.n))).scalar()
        assert rollups.inbox(conn) == (0, None)
    assert counted_reports == total
