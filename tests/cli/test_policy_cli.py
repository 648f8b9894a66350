"""``wai-dispatch policy show|set|check``: the verdict offline, its exit status, one-line typed
errors, and the history kept with who and when."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "docs" / "examples" / "policy.yaml"
RUN = ROOT / "docs" / "examples" / "run-report.json"


def _refused_run(tmp_path: Path) -> Path:
    run = json.loads(RUN.read_text())
    run["decodes"][1]["set_digest"] = "c" * 64
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(run))
    return path


def test_check_accepts_a_compliant_run_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(RUN), "--policy", str(POLICY)]) == 0
    assert capsys.readouterr().out == (
        "run report kiosk-01-2026-11-30-0001 from kiosk-01 [kiosk]: accepted\n"
        "2 of 2 decodes accepted\n"
    )


def test_check_refuses_with_every_reason_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "check", str(_refused_run(tmp_path)), "--policy", str(POLICY)]) == 1
    assert capsys.readouterr().out == (
        "run report kiosk-01-2026-11-30-0001 from kiosk-01 [kiosk]: refused\n"
        "  decode 1: set_not_allowed: class 'kiosk' may not run set cccccccccccc… "
        "for wai.neural.bmshj2018\n"
        "1 of 2 decodes accepted\n"
    )
    assert (
        main(["policy", "check", str(_refused_run(tmp_path)), "--policy", str(POLICY), "--json"])
        == 1
    )
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["accepted"], verdict["refused_decodes"]) == (False, 1)
    assert verdict["decodes"][1]["reasons"][0]["rule"] == "set_not_allowed"


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        (lambda d: (d / "x.json").write_text("{"), "run_report_malformed: not JSON"),
        (lambda d: None, "file_unreadable: cannot read"),
    ],
)
def test_bad_input_is_one_typed_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: object, error: str
) -> None:
    setup(tmp_path)  # type: ignore[operator]
    status = main(["policy", "check", str(tmp_path / "x.json"), "--policy", str(POLICY)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"wai-dispatch: error: {error}")
    assert err.count("\n") == 1


def test_check_without_a_policy_in_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "check", str(RUN), "--data-dir", str(tmp_path)]) == 2
    assert "policy_not_set: no model policy is set" in capsys.readouterr().err


def test_set_show_and_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    assert main(["policy", "set", str(POLICY), "--by", "ana", *data]) == 0
    assert capsys.readouterr().out.startswith("policy v1 in force (sha256 ")
    changed = tmp_path / "p2.yaml"
    changed.write_text(POLICY.read_text().replace("kiosk-02", "kiosk-09"))
    assert main(["policy", "set", str(changed), "--by", "ben", *data]) == 0
    capsys.readouterr()
    assert main(["policy", "show", "--history", "--json", *data]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["version"], r["set_by"]) for r in rows] == [(1, "ana"), (2, "ben")]
    assert main(["policy", "show", *data]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("# policy v2, set by ben at ")
    assert "kiosk-09" in shown
    assert main(["policy", "show", "--version", "1", "--json", *data]) == 0
    assert "kiosk-02" in json.loads(capsys.readouterr().out)["text"]
    # judged by the policy in force: v2 no longer lists kiosk-02
    run = json.loads(RUN.read_text())
    run["sink"] = "kiosk-02"
    path = tmp_path / "k2.json"
    path.write_text(json.dumps(run))
    assert main(["policy", "check", str(path), *data]) == 1
    assert "sink_unclassified" in capsys.readouterr().out


def test_set_refuses_a_bad_policy_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.read_text().replace("tiers: [none]", "tiers: [nothing]"))
    assert main(["policy", "set", str(bad), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wai-dispatch: error: policy_invalid: {bad}:8:13: ")
    assert main(["policy", "show", "--history", "--json", "--data-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == []  # nothing was kept
