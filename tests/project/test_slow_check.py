"""The ``slow`` marker check (tests/_slowcheck.py): under CI an unmarked test over the limit
fails the session and is listed; a marked one, a quick one, or a run outside CI passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _slowcheck import enabled

TESTS = Path(__file__).resolve().parents[1]

BUSY = (
    "def busy(s):\n    end = time.process_time() + s\n"
    "    while time.process_time() < end:\n        pass\n"
)


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(
        "from _slowcheck import register\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'slow: slow')\n"
        "    register(config)\n",
        encoding="utf-8",
    )
    (tmp_path / "test_timed.py").write_text(
        "import time, pytest\n" + BUSY + "def test_unmarked_busy():\n    busy(0.6)\n"
        "@pytest.mark.slow\ndef test_marked_busy():\n    busy(0.6)\n"
        "def test_unmarked_sleeping():\n    time.sleep(0.6)  # waits: no CPU, not slow work\n"
        "def test_quick():\n    pass\n",
        encoding="utf-8",
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "WAI_SLOW_CHECK")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(TESTS), "WAI_SLOW_LIMIT_S": "0.3", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_an_unmarked_slow_test_fails_the_session_under_ci(tmp_path: Path) -> None:
    result = _run(tmp_path, CI="true")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "unmarked slow tests" in result.stdout
    listed = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(listed) == 1 and "test_unmarked_busy" in listed[0], result.stdout
    assert "4 passed" in result.stdout


@pytest.mark.slow
def test_outside_ci_or_turned_off_the_check_is_silent(tmp_path: Path) -> None:
    for env in ({}, {"CI": "true", "WAI_SLOW_CHECK": "0"}):
        result = _run(tmp_path, **env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "unmarked slow tests" not in result.stdout


def test_enabled_reads_ci_as_ci_systems_set_it() -> None:
    assert enabled({"CI": "true"}) and enabled({"CI": "1"})
    assert not enabled({}) and not enabled({"CI": "false"}) and not enabled({"CI": "0"})
    assert not enabled({"CI": "true", "WAI_SLOW_CHECK": "0"})
