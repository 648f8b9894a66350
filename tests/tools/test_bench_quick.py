"""``python -m wai_dispatch.tools.bench all --quick``: the smoke run of every benchmark. It is
checked to run and to print every section with the load average; its timings are never
asserted (speed is measured by ``make bench``, beside anchors, not by tests)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wai_dispatch.tools import bench


def test_every_bench_has_a_quick_run() -> None:
    assert set(bench.QUICK) == set(bench.BENCHES)


def test_an_unknown_bench_is_refused_before_any_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick", "entropy", "nope"]) == 2
    out = capsys.readouterr().out
    assert "unknown benchmark 'nope'" in out
    assert "===" not in out  # nothing ran


@pytest.mark.slow
@pytest.mark.tools
@pytest.mark.skipif(
    os.environ.get("WAI_BENCH_SMOKE") != "1",
    reason="minutes on 2 cores (every bench starts processes, a service, a browser); "
    "WAI_BENCH_SMOKE=1 runs it",
)
def test_bench_all_quick_prints_every_section() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wai_dispatch.tools.bench", "all", "--quick"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for name, module in bench.BENCHES.items():
        assert f"=== {name} ({module}) ===" in done.stdout
        assert f"[{name}] before: load average " in done.stdout
        assert f"[{name}] after " in done.stdout
