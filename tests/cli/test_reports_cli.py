"""``wai-dispatch reports prune``: one retention pass against the data directory's report store
(the function the service's thread runs), its JSON, the retention taken from the settings or
``--days``, and a negative retention refused as a setting, one line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore

DAY = 86_400_000


def _rec(i: int, age_days: float) -> ReportRecord:
    return ReportRecord.from_json(
        {
            "id": f"00000000-0000-4000-8000-{i:012d}",
            "request_id": f"r{i}",
            "created_ms": int(time.time() * 1000 - age_days * DAY),
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
            "placement": {},
            "refusals": [{"path": "npu/model-runtime/float", "code": "dispatch_unit_absent"}],
            "report": {},
        }
    )


def test_prune_deletes_reports_past_retention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ReportStore(f"sqlite:///{tmp_path / 'reports.db'}")
    store.migrate()
    store.insert([_rec(i, age) for i, age in enumerate((1, 10, 29, 31, 45, 400))])
    monkeypatch.setenv("WAI_REPORT_RETENTION_DAYS", "60")
    assert main(["reports", "prune", "--data-dir", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["reports"], out["rollup_hours"], out["rollups_before"]) == (1, 0, None)
    assert main(["reports", "prune", "--data-dir", str(tmp_path), "--days", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("reports: pruned 2 created before ")
    assert lines[1] == "roll-ups: kept forever (retention 0 days)"
    assert store.count() == 3
    assert main(["reports", "prune", "--data-dir", str(tmp_path), "--days", "0"]) == 0
    assert capsys.readouterr().out.startswith("reports: kept forever (retention 0 days)")
    assert store.count() == 3
    store.dispose()


def test_a_negative_retention_is_a_bad_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reports", "prune", "--data-dir", str(tmp_path), "--days", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wai-dispatch: error: settings_invalid: report_retention_days")
    assert len(err.splitlines()) == 1
