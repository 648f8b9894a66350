"""The one report record: the columns a record reads from a report's JSON form are the typed
``dispatch.Report``'s fields, its JSON form made once and carried as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.dispatch import Report
from wai_dispatch.service.store.records import UNITS, RecordedRefusal, ReportRecord, records_for

VECTORS = sorted((Path(__file__).resolve().parents[3] / "conformance" / "dispatch").glob("*.json"))
FIELDS: dict[str, Any] = {
    "id": "r1",
    "request_id": "q1",
    "created_ms": 1,
    "sink": "sink-a",
    "role": "primary",
    "set_digest": "ab" * 32,
    "symbols_digest": "cd" * 32,
    "rgb_digest": "ef" * 32,
    "duration_ms": 1.23456,
}


@pytest.mark.parametrize("vector", VECTORS, ids=[v.stem for v in VECTORS])
def test_the_record_columns_are_the_typed_report_fields(vector: Path) -> None:
    """Every conformance vector's report (a path that ran with and without a placement, none
    that ran, refusals of every kind): the columns read from its JSON form are the typed
    report's fields."""
    report = Report.from_json(json.loads(vector.read_bytes())["expected"])
    rec = ReportRecord.of(report.to_json(), **FIELDS)
    ran = report.ran
    assert (rec.capability, rec.needed) == (report.capability, str(report.needed))
    assert rec.path_ran == (str(ran.path) if ran else None)
    assert rec.tier == (str(ran.tier) if ran else None)
    assert rec.outcome == ("decoded" if ran else "refused")
    assert rec.rgb_digest == (FIELDS["rgb_digest"] if ran else None)
    placement = None if ran is None else ran.placement
    zeros = {unit: 0 for unit in UNITS}
    placed = zeros if placement is None else {u: getattr(placement, u) for u in UNITS}
    assert rec.placement == (placed if ran else {})
    refusals = tuple(RecordedRefusal(str(r.path), str(r.reason)) for r in report.refused)
    assert rec.refusals == refusals
    assert rec.report == report.to_json() and rec.duration_ms == 1.235


def test_records_for_keeps_one_json_form() -> None:
    report = Report.from_json(json.loads(VECTORS[0].read_bytes())["expected"])
    (rec,) = records_for(
        [report],
        request_id="q",
        sink="s",
        set_digests=[None],
        symbols_digests=[None],
        rgb_digest=None,
        duration_ms=0.0,
    )
    assert rec.report == report.to_json() and rec.role == "primary"
