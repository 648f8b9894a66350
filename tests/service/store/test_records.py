"""The one report record: a decode's typed ``dispatch.Report`` becomes a ``ReportRecord`` with
the same columns as the record of the same report sent as JSON by a sink (``of_report`` and
``of`` agree), its JSON form made once and carried as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.dispatch import Report
from wai_dispatch.service.store.records import ReportRecord, records_for

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
def test_the_typed_record_is_the_json_record(vector: Path) -> None:
    """Every conformance vector's report (a path that ran with and without a placement, none
    that ran, refusals of every kind) gives the same record both ways."""
    report = Report.from_json(json.loads(vector.read_bytes())["expected"])
    typed = ReportRecord.of_report(report, **FIELDS)
    assert typed == ReportRecord.of(report.to_json(), **FIELDS)
    assert typed.report == report.to_json()


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
