"""``python -m wai_dispatch.tools.bench all --quick``: the smoke run of every benchmark. It is
checked to run and to print every section with the load average; its timings are never
asserted (speed is measured by ``make bench``, beside anchors, not by tests)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from wai_dispatch.tools import bench


def test_every_bench_is_a_module() -> None:
    for b in bench.BENCHES.values():
        assert importlib.util.find_spec(f"wai_dispatch.tools.{b.module}") is not None, b.module


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
    for name, b in bench.BENCHES.items():
        assert f"=== {name} (wai_dispatch.tools.{b.module}) ===" in done.stdout
        assert f"[{name}] before: load average " in done.stdout
        assert f"[{name}] after " in done.stdout


def test_options_after_one_name_go_to_that_bench(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[list[str]] = []
    fake = type("Fake", (), {"main": staticmethod(lambda argv: seen.append(argv) or 0)})
    monkeypatch.setattr(bench, "_module", lambda name: fake)
    assert bench.main(["store", "--seconds", "5", "--writers", "64"]) == 0
    assert bench.main(["--quick", "store", "--writers", "8"]) == 0
    assert bench.main(["all", "--quick"]) == 0
    assert seen[0] == ["--seconds", "5", "--writers", "64"]
    assert seen[1] == [*bench.BENCHES["store"].quick.split(), "--writers", "8"]
    assert seen[2:] == [b.quick.split() for b in bench.BENCHES.values()]
    assert "=== store (wai_dispatch.tools.bench_store) ===" in capsys.readouterr().out
    assert bench.main(["entropy", "decode", "--repeats", "1"]) == 2  # options take one name
    assert "options go with one benchmark" in capsys.readouterr().out


def test_help_lists_the_benches_and_a_bench_help_shows_its_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench.main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {name} " in listed for name in bench.BENCHES)
    with pytest.raises(SystemExit) as done:
        bench.main(["store", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "python -m wai_dispatch.tools.bench store" in shown
    assert "--writers" in shown and "--seconds" in shown and "--postgres" in shown
    assert "===" not in shown  # help, no run
