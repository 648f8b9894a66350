"""The CLI's file handling (codec/files.py and the commands that use it): only regular files
are read, never more than the limit; outputs are written whole or not at all, never over an
input; every bad path is a typed one-line error with exit status 2."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.codec import files
from wai_dispatch.codec.files import (
    FileError,
    FileNotRegular,
    FileTooLarge,
    FileUnwritable,
    read_regular,
    write_atomic,
)
from wai_dispatch.conformance import envelopes_dir

ENVELOPE = envelopes_dir() / "bmshj2018-demo-q3.json"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


class OsWith:
    """``os`` as codec/files.py sees it, with some functions replaced (the rest of the
    process, the set store included, keeps the real ones)."""

    def __init__(self, **replaced: object) -> None:
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


def one_error(err: str, code: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"wai-dispatch: error: {code}: "), err


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def envelope(tmp_path: Path) -> Path:
    target = tmp_path / "env.json"
    shutil.copyfile(ENVELOPE, target)
    return target


# --- reading ----------------------------------------------------------------------------------


def test_read_regular_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a"
    path.write_bytes(b"abc")
    assert read_regular(path, limit=3) == b"abc"
    with pytest.raises(FileTooLarge, match="over the limit of 2"):
        read_regular(path, limit=2)
    with pytest.raises(FileError, match="cannot read") as info:
        read_regular(tmp_path / "missing", limit=10)
    assert info.value.code == "file_unreadable"


def test_read_regular_refuses_devices_folders_and_pipes(tmp_path: Path) -> None:
    with pytest.raises(FileNotRegular, match="a device"):
        read_regular(Path("/dev/zero"), limit=1 << 20)
    with pytest.raises(FileNotRegular, match="a directory"):
        read_regular(tmp_path, limit=1 << 20)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FileNotRegular, match="FIFO"):
        read_regular(fifo, limit=1 << 20)
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    with pytest.raises(FileNotRegular):
        read_regular(link, limit=1 << 20)


def test_a_fifo_swapped_in_after_the_check_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The type is checked again on the opened descriptor, opened with O_NONBLOCK."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    regular = os.stat(ENVELOPE)
    real_stat = os.stat
    swapped = OsWith(stat=lambda p, *a, **k: regular if Path(p) == fifo else real_stat(p, *a, **k))
    monkeypatch.setattr(files, "os", swapped)
    with pytest.raises(FileNotRegular, match="FIFO"):
        read_regular(fifo, limit=1 << 20)


def test_decode_dev_zero_and_a_sparse_8_gib_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    status, _, err = cli(capsys, "decode", "/dev/zero", "--data-dir", str(data_dir))
    assert status == 2
    one_error(err, "file_not_regular")
    sparse = tmp_path / "sparse.cbor"
    with open(sparse, "wb") as fh:
        fh.truncate(8 << 30)
    status, _, err = cli(capsys, "decode", str(sparse), "--data-dir", str(data_dir))
    assert status == 2
    one_error(err, "envelope_too_large")


def test_decode_a_fifo_ends_at_once(tmp_path: Path) -> None:
    """In a child process, so a regression blocks the child (killed by the timeout), not us."""
    fifo = tmp_path / "env.cbor"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "wai_dispatch", "decode", str(fifo), "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    one_error(done.stderr, "file_not_regular")


def test_import_compressai_reads_only_regular_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    status, _, err = cli(
        capsys,
        "import-compressai",
        "/dev/zero",
        "-o",
        str(tmp_path / "x.json"),
        "--data-dir",
        str(data_dir),
    )
    assert status == 2
    one_error(err, "file_not_regular")
    assert not (tmp_path / "x.json").exists()


def test_plan_set_dir_with_a_fifo_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    os.mkfifo(folder / "set.json")
    done = subprocess.run(
        [sys.executable, "-m", "wai_dispatch", "plan", "--set-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    # the set folder's manifest is a set file: the store's own refusal of a FIFO
    one_error(done.stderr, "set_unsafe_entry")
    assert "FIFO" in done.stderr


def test_sets_install_a_folder_holding_a_fifo(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    from wai_dispatch.conformance import sets_dir

    folder = tmp_path / "set"
    shutil.copytree(sets_dir() / "bmshj2018-demo-q3", folder)
    (folder / "decoder.onnx").unlink()
    os.mkfifo(folder / "decoder.onnx")
    status, _, err = cli(capsys, "sets", "install", str(folder), "--data-dir", str(data_dir))
    assert status == 2
    one_error(err, "set_unsafe_entry")


# --- writing ----------------------------------------------------------------------------------


def test_write_atomic_replaces_whole(tmp_path: Path) -> None:
    path = tmp_path / "out.png"
    write_atomic(path, b"one")
    assert path.read_bytes() == b"one"
    path.chmod(0o640)
    write_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "dotted"])
def test_decode_refuses_to_overwrite_its_input(
    capsys: pytest.CaptureFixture[str], envelope: Path, data_dir: Path, how: str
) -> None:
    before = envelope.read_bytes()
    target = {
        "same": envelope,
        "symlink": envelope.with_name("link.png"),
        "hardlink": envelope.with_name("hard.png"),
        "dotted": envelope.parent / "." / envelope.name,
    }[how]
    if how == "symlink":
        target.symlink_to(envelope)
    elif how == "hardlink":
        os.link(envelope, target)
    status, out, err = cli(
        capsys, "decode", str(envelope), "-o", str(target), "--data-dir", str(data_dir)
    )
    assert status == 2 and out == ""
    one_error(err, "output_is_input")
    assert envelope.read_bytes() == before


def test_import_compressai_refuses_to_overwrite_its_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    from wai_dispatch.codec.compressai_rans import dump_compressed

    source = tmp_path / "in.json"
    source.write_bytes(dump_compressed([[b"\0" * 8]], (1, 1), model="m", quality=3))
    before = source.read_bytes()
    status, _, err = cli(
        capsys, "import-compressai", str(source), "-o", str(source), "--data-dir", str(data_dir)
    )
    assert status == 2
    one_error(err, "output_is_input")
    assert source.read_bytes() == before


def bad_outputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "a-file").write_bytes(b"x")
    (tmp_path / "a-folder").mkdir()
    return {
        "missing-folder": (tmp_path / "nowhere" / "out.png", "does not exist"),
        "a-folder": (tmp_path / "a-folder", "a directory"),
        "file-in-the-way": (tmp_path / "a-file" / "out.png", "in the way"),
        "a-device": (Path("/dev/null"), "a device"),
    }


@pytest.mark.parametrize("name", ["missing-folder", "a-folder", "file-in-the-way", "a-device"])
def test_decode_bad_output_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, name: str
) -> None:
    target, words = bad_outputs(tmp_path)[name]
    status, out, err = cli(
        capsys, "decode", str(ENVELOPE), "-o", str(target), "--data-dir", str(data_dir)
    )
    assert status == 2 and out == ""
    one_error(err, "file_unwritable")
    assert words in err


@pytest.mark.parametrize("name", ["missing-folder", "a-folder", "file-in-the-way"])
def test_import_compressai_bad_output_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, name: str
) -> None:
    from wai_dispatch.codec.compressai_rans import dump_compressed

    source = tmp_path / "in.json"
    source.write_bytes(dump_compressed([[b"\0" * 8]], (1, 1), model="m", quality=3))
    target, words = bad_outputs(tmp_path)[name]
    status, _, err = cli(
        capsys, "import-compressai", str(source), "-o", str(target), "--data-dir", str(data_dir)
    )
    assert status == 2
    one_error(err, "file_unwritable")
    assert words in err


def test_demo_out_dir_in_the_way(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    blocker = tmp_path / "out"
    blocker.write_bytes(b"x")
    status, _, err = cli(capsys, "demo", "-o", str(blocker / "sub"), "--data-dir", str(data_dir))
    assert status == 2
    one_error(err, "file_unwritable")


@pytest.mark.parametrize(
    ("errno_", "words"),
    [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "Read-only"), (errno.EACCES, "denied")],
)
def test_write_failures_leave_the_target_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errno_: int, words: str
) -> None:
    target = tmp_path / "out.png"
    target.write_bytes(b"old")

    def fail(*_: object) -> int:
        raise OSError(errno_, os.strerror(errno_))

    monkeypatch.setattr(files, "os", OsWith(write=fail))
    with pytest.raises(FileUnwritable, match=words):
        write_atomic(target, b"new" * 1000)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]


def test_decode_onto_a_full_disk_is_a_typed_error(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "os", OsWith(fsync=full))
    target = tmp_path / "out.png"
    status, _, err = cli(
        capsys, "decode", str(ENVELOPE), "-o", str(target), "--data-dir", str(data_dir)
    )
    assert status == 2
    one_error(err, "file_unwritable")
    assert "the disk is full" in err and not target.exists()


@contextlib.contextmanager
def small_tmpfs(where: Path, *options: str) -> Iterator[Path]:
    """A real tmpfs of a few KiB (needs root and a kernel that lets us mount): a real full
    disk and a real read-only place, where the machine allows it."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(("size=16k", *options)), "tmpfs", str(where)],
        capture_output=True,
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="needs root")
def test_real_full_disk_and_read_only_place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    with small_tmpfs(tmp_path / "small") as small:
        status, _, err = cli(
            capsys, "decode", str(ENVELOPE), "-o", str(small / "o.png"), "--data-dir", str(data_dir)
        )
        assert status == 2
        one_error(err, "file_unwritable")
        assert "the disk is full" in err
        assert list(small.iterdir()) == []
    with small_tmpfs(tmp_path / "ro", "ro") as ro:
        status, _, err = cli(
            capsys, "decode", str(ENVELOPE), "-o", str(ro / "o.png"), "--data-dir", str(data_dir)
        )
        assert status == 2
        one_error(err, "file_unwritable")
        assert "Read-only" in err


def test_decode_writes_the_png(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path
) -> None:
    target = tmp_path / "out.png"
    status, out, _ = cli(
        capsys, "decode", str(ENVELOPE), "-o", str(target), "--data-dir", str(data_dir)
    )
    assert status == 0 and str(target) in out
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.png"]


def test_an_os_error_no_typed_error_names_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last net: an OSError nothing turned into a typed error (the store's own writes on a
    full disk, say) is still one line, io_failed, exit 2, never a traceback."""
    import wai_dispatch.cli.sets as sets_cli

    def full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "data"))

    monkeypatch.setattr(sets_cli, "decoder", full)
    status, out, err = cli(capsys, "sets", "list", "--data-dir", str(tmp_path / "data"))
    assert status == 2 and out == ""
    one_error(err, "io_failed")
    assert "No space left on device" in err
