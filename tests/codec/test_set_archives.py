"""Hostile archives for ``sets install``: corrupt compressed members, names that are not UTF-8,
and members the manifest does not list — each a typed one-line error, refused from the member
headers before anything is written."""

from __future__ import annotations

import io
import lzma
import tarfile
import zipfile
from pathlib import Path

import pytest

from wai_dispatch.codec.sets import SetStore, write_manifest
from wai_dispatch.codec.sets import errors as set_errors
from wai_dispatch.codec.sets import stage as store_mod

CAP = "wai.neural.bmshj2018"
FILES = {
    "wai-usage.json": b'{"licence": "CC0-1.0"}',
    "decoder.onnx": bytes(range(256)) * 64,
}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name, data in FILES.items():
        (src / name).write_bytes(data)
    write_manifest(src, name="demo", capability=CAP, version="1", facts={"quality": 3})
    return src


@pytest.fixture
def store(tmp_path: Path) -> SetStore:
    return SetStore(tmp_path / "sets")


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names the install writes, in order."""
    written: list[str] = []
    real = store_mod._copy

    def spy(src: object, target: Path, name: str, budget: object) -> tuple[str, int]:
        written.append(name)
        return real(src, target, name, budget)  # type: ignore[arg-type]

    monkeypatch.setattr(store_mod, "_copy", spy)
    return written


def refused(store: SetStore, archive: Path, code: str) -> str:
    with pytest.raises(set_errors.SetError) as info:
        store.install(archive)
    assert info.value.code == code, info.value
    assert "\n" not in info.value.message
    assert not list(store.root.glob("[0-9a-f]*"))
    return info.value.message


def tar(archive: Path, members: list[tuple[str, bytes]], mode: str = "w") -> Path:
    with tarfile.open(archive, mode) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return archive


def set_members(source: Path) -> list[tuple[str, bytes]]:
    return [(n, (source / n).read_bytes()) for n in ["set.json", *FILES]]


@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_unlisted_member_refused_before_anything_is_written(
    source: Path, store: SetStore, tmp_path: Path, copies: list[str], kind: str
) -> None:
    """An unlisted member (here first, and large) is refused from its header: nothing is
    extracted, not even the listed files (the manifest is read first, from its member)."""
    members = [("bomb.bin", b"\0" * (1 << 20)), *set_members(source)]
    archive = tmp_path / f"set.{kind}"
    if kind == "tar":
        tar(archive, members, "w:gz")
    else:
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
    message = refused(store, archive, "set_file_unexpected")
    assert "bomb.bin" in message
    assert copies == []


def test_listed_member_of_the_wrong_size_refused_before_writing(
    source: Path, store: SetStore, tmp_path: Path, copies: list[str]
) -> None:
    members = [(n, d + b"x" if n == "decoder.onnx" else d) for n, d in set_members(source)]
    refused(store, tar(tmp_path / "set.tar", members), "set_file_mismatch")
    assert copies == []


def test_a_good_archive_still_installs(source: Path, store: SetStore, tmp_path: Path) -> None:
    installed = store.install(tar(tmp_path / "set.tar.xz", set_members(source), "w:xz"))
    assert installed.name == "demo"
    prefixed = [(f"demo/{n}", d) for n, d in set_members(source)]
    other = SetStore(tmp_path / "other")
    assert other.install(tar(tmp_path / "p.tar", prefixed)).digest == installed.digest


def test_corrupt_tar_xz(source: Path, store: SetStore, tmp_path: Path) -> None:
    archive = tar(tmp_path / "set.tar.xz", set_members(source), "w:xz")
    data = bytearray(archive.read_bytes())
    for i in range(60, len(data) - 40, 97):
        data[i] ^= 0x55
    archive.write_bytes(bytes(data))
    refused(store, archive, "set_archive_invalid")
    # a stream lzma itself refuses (LZMAError), not tarfile
    archive.write_bytes(lzma.compress(b"x" * 5000)[:-20] + b"\0" * 20)
    refused(store, archive, "set_archive_invalid")


def test_corrupt_lzma_zip_member(source: Path, store: SetStore, tmp_path: Path) -> None:
    archive = tmp_path / "set.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_LZMA) as zf:
        for name, data in set_members(source):
            zf.writestr(name, data)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("decoder.onnx")
    start = info.header_offset + 30 + len(info.filename) + 20
    for i in range(start, start + min(info.compress_size - 30, 200)):
        data[i] ^= 0xA5
    archive.write_bytes(bytes(data))
    refused(store, archive, "set_archive_invalid")


def test_zip_member_name_not_utf8(source: Path, store: SetStore, tmp_path: Path) -> None:
    archive = tmp_path / "set.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in set_members(source):
            zf.writestr(name, data)
        zf.writestr("é.bin", b"x")  # non-ASCII: the UTF-8 flag is set
    raw = archive.read_bytes()
    assert raw.count("é".encode()) == 2
    archive.write_bytes(raw.replace("é".encode(), b"\xff\xfe"))
    message = refused(store, archive, "set_archive_invalid")
    assert "UTF-8" in message


def test_archive_error_messages_are_one_line(store: SetStore, tmp_path: Path) -> None:
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"PK\x03\x04" + b"\n\n" * 40)
    refused(store, junk, "set_archive_invalid")
    junk = tmp_path / "junk.tar.bz2"
    junk.write_bytes(b"BZh9" + b"\n" * 100)
    refused(store, junk, "set_archive_invalid")
