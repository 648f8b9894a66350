"""``bench store`` briefly on PostgreSQL: the side-by-side table (group commit beside
PostgreSQL's own ``COPY`` into the same tables) and its last line's exact form, with the writers
in one process and shared by two; without PostgreSQL, the ``COPY`` anchor says it needs it. Its
rates are never asserted."""

from __future__ import annotations

import re

import pytest

from wai_dispatch.tools import bench_store

LAST = re.compile(
    r"store: group commit (\d{1,3}(?:,\d{3})*) reports/s into PostgreSQL at (\d+) writers"
    r" = (\d+\.\d\d) x PostgreSQL's own COPY \((\d{1,3}(?:,\d{3})*) reports/s\) on the same tables"
)


@pytest.mark.parametrize("processes", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_store_bench_prints_group_commit_beside_copy(
    postgres: str, capsys: pytest.CaptureFixture[str], processes: int
) -> None:
    argv = ["--postgres", postgres, "--seconds", "0.2", "--writers", "1,2"]
    assert bench_store.main([*argv, "--processes", str(processes)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    at = lines.index("postgresql: reports/s acknowledged through Recorder.record, 0.2 s each")
    head = lines[at + 1].split()
    assert head[-3:] == ["COPY/s", "COPY+inbox/s", "group/COPY"]
    rows = [lines[at + 2].split(), lines[at + 3].split()]
    assert [r[0] for r in rows] == ["1", "2"] and all(len(r) == 10 for r in rows)
    assert "  COPY: binary, 1000 reports, their keys and their refusals a transaction" in lines
    shared = f"  recording processes: {processes} (the writers shared among them, their reports"
    assert any(line.startswith(shared) for line in lines)
    got = LAST.fullmatch(lines[-1])
    assert got is not None, lines[-1]
    n, writers, r, m = got.groups()
    assert writers == "2"
    group, copied = float(rows[1][2]), float(rows[1][7])  # the 2 writers' row
    assert int(n.replace(",", "")) == round(group) and int(m.replace(",", "")) == round(copied)
    assert float(r) == pytest.approx(group / copied, abs=0.01) and float(rows[1][9]) == float(r)


def test_without_postgres_the_copy_anchor_says_it_needs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench_store.main(["--no-postgres", "--seconds", "0.1", "--writers", "1"]) == 0
    out = capsys.readouterr().out
    assert "COPY/s" not in out
    assert out.strip().splitlines()[-1] == "store: the COPY anchor needs PostgreSQL (none measured)"
