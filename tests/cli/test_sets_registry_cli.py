"""``wai-dispatch sets`` through the set registry (docs/sets.md): a removed bundled set stays
removed (``sets list`` and ``decode`` alike), an install clears its tombstone, the bundled sets
are left out with ``WAI_BUNDLED_SETS`` off, and a database that does not answer is one typed
line (``set_registry_down``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.conformance import sets_dir as bundled_sets
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.setregistry import SetRegistry

INT_ENVELOPE = envelopes_dir() / "int-synth-int8-units-demo-q3.json"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    try:
        return status, json.loads(out.out), out.err
    except ValueError:
        return status, out.out, out.err


def _registry(data: Path) -> dict[str, Any]:
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    try:
        return {e.digest: e for e in SetRegistry(store).entries()}
    finally:
        store.dispose()


def test_a_removed_bundled_set_stays_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    dd = ("--data-dir", str(data))
    status, rows, err = _run(capsys, "sets", "list", "--json", *dd)
    assert status == 0, err
    by_cap = {r["capability"]: r["digest"] for r in rows}
    digest = by_cap["wai.neural.int_synth"]
    assert set(_registry(data)) == set(by_cap.values())  # put into the registry, bundled
    assert all(e.bundled and e.live for e in _registry(data).values())

    assert _run(capsys, "sets", "remove", digest[:10], *dd)[0] == 0
    assert _registry(data)[digest].removed_ms is not None  # its tombstone
    for _ in range(2):  # and again: not installed back
        status, rows, _ = _run(capsys, "sets", "list", "--json", *dd)
        assert sorted(r["digest"] for r in rows) == sorted(
            d for c, d in by_cap.items() if c != "wai.neural.int_synth"
        )
    out = tmp_path / "x.png"
    status, said, err = _run(capsys, "decode", str(INT_ENVELOPE), "-o", str(out), *dd)
    assert status != 0 and "set_not_installed" in f"{said}{err}"  # nor does decode bring it back
    assert not out.exists()
    assert _run(capsys, "sets", "remove", digest, *dd)[0] == 2  # not live: set_not_installed

    folder = Path(bundled_sets()) / "int-synth-int8-units-demo-q3"
    status, entry, err = _run(capsys, "sets", "install", str(folder), "--json", *dd)
    assert status == 0 and entry["digest"] == digest, err
    assert _registry(data)[digest].live
    assert _run(capsys, "decode", str(INT_ENVELOPE), "-o", str(out), *dd)[0] == 0


def test_without_bundled_sets_nothing_is_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAI_BUNDLED_SETS", "false")
    data = tmp_path / "data"
    status, rows, err = _run(capsys, "sets", "list", "--json", "--data-dir", str(data))
    assert (status, rows) == (0, []), err
    assert _registry(data) == {}


def test_a_registry_that_does_not_answer_is_one_typed_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the database's folder belongs")
    monkeypatch.setenv("WAI_DATABASE_URL", f"sqlite:///{blocker / 'db' / 'reports.db'}")
    folder = Path(bundled_sets()) / "int-synth-int8-units-demo-q3"
    data = tmp_path / "data"
    status, _, err = _run(capsys, "sets", "install", str(folder), "--data-dir", str(data))
    assert status == 3  # unavailable: what the command needs does not answer
    assert err.strip() == (
        "wai-dispatch: error: set_registry_down: the set registry (the report database) "
        "does not answer; nothing changed"
    )
    assert not any(p.name != "removed.json" for p in (data / "sets").glob("*"))


def test_the_command_in_its_own_process_says_it_once(tmp_path: Path) -> None:
    """In a process of its own no test runner holds a log handler, so a warning the library
    logs on the way (the registry's) would reach stderr through Python's last-resort handler
    beside the typed error: the command says the problem once, by its error."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the database's folder belongs")
    env = dict(os.environ, WAI_DATABASE_URL=f"sqlite:///{blocker / 'db' / 'reports.db'}")
    folder = Path(bundled_sets()) / "int-synth-int8-units-demo-q3"
    argv = ["sets", "install", str(folder), "--data-dir", str(tmp_path / "data")]
    done = subprocess.run(
        [sys.executable, "-m", "wai_dispatch.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr.splitlines() == [
        "wai-dispatch: error: set_registry_down: the set registry (the report database) "
        "does not answer; nothing changed"
    ]


def test_a_set_of_a_capability_this_build_does_not_know_is_refused_and_nothing_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No path here could decode it, and installed it would become its capability's default:
    ``sets install`` refuses it with ``unknown_capability`` naming the known ones, and neither
    the cache nor the registry keeps it."""
    from wai_dispatch.codec.sets import write_manifest

    folder = tmp_path / "bogus"
    (folder).mkdir()
    (folder / "wai-usage.json").write_text("{}\n")
    write_manifest(folder, name="bogus", capability="wai.neural.bogus", version="1", facts={})
    data = tmp_path / "data"
    status, out, err = _run(capsys, "sets", "install", str(folder), "--data-dir", str(data))
    assert (status, out) == (2, "")
    assert err.splitlines() == [
        "wai-dispatch: error: unknown_capability: set bogus ("
        + err.split("(", 1)[1].split(")", 1)[0]
        + ") is of capability 'wai.neural.bogus', which this build does not know (known: "
        "wai.neural.bmshj2018, wai.neural.bmshj2018_hyperprior, wai.neural.int_synth); "
        "no path here could decode it"
    ]
    status, listed, _ = _run(capsys, "sets", "list", "--json", "--data-dir", str(data))
    assert status == 0
    assert "wai.neural.bogus" not in json.dumps(listed)
    assert all(e.capability != "wai.neural.bogus" for e in _registry(data).values())
