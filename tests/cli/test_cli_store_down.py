"""Issue 29, item 8: every command that opens the report store, with the store down (a
PostgreSQL URL whose port refuses, a SQLite file whose folder cannot exist) or its disk full,
prints one typed line, ``wai-dispatch: error: store_down: …`` (exit 3, the status of an
unavailable error: issue 35), never a traceback (it
was a 40–130-line ``StoreDown``/``OperationalError`` traceback of ``tokens create``)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main

COMMANDS = [
    ["tokens", "create", "edge-1"],
    ["tokens", "list"],
    ["tokens", "revoke", "edge-1"],
    ["policy", "show"],
    ["reports", "prune"],
]


def _refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture(params=["postgresql", "sqlite"])
def down_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return f"postgresql://postgres@127.0.0.1:{_refusing_port()}/test"
    blocker = tmp_path / "not-a-folder"
    blocker.write_bytes(b"")
    return f"sqlite:///{blocker / 'reports.db'}"


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 3, (out, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("wai-dispatch: error: store_down: the report store "), err
    return err


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_store_that_is_down_is_one_typed_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    down_url: str,
    argv: list[str],
) -> None:
    monkeypatch.setenv("WAI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("WAI_DATABASE_URL", down_url)
    assert "does not answer" in _one_line(capsys, argv)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs of 64 KiB, filled (needs root and a kernel that lets us mount)."""
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root and a kernel that allows it)")
    try:
        fd = os.open(where / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: the disk is full
            pass
        finally:
            os.close(fd)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)  # -l: the store may hold it


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="needs root")
def test_tokens_create_on_a_full_disk_is_one_typed_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, full_disk: Path
) -> None:
    monkeypatch.setenv("WAI_DATA_DIR", str(full_disk / "data"))
    monkeypatch.delenv("WAI_DATABASE_URL", raising=False)
    err = _one_line(capsys, ["tokens", "create", "edge-1"])
    assert "full" in err
