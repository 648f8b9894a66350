"""Staging a parameter set for the store: its files copied from a directory or a .tar, .tar.gz
or .zip archive into a temporary directory, every name, type and size checked on the way.

Nothing here decides what a set is: :meth:`codec.sets.store.SetStore.install` stages, then
checks the staged files against the manifest, then renames the directory into place
(docs/sets.md).
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import blake3

from wai_dispatch.codec.sets.errors import (
    SetArchiveInvalid,
    SetFileMissing,
    SetFileUnexpected,
    SetTooLarge,
    SetUnsafeEntry,
)
from wai_dispatch.codec.sets.manifest import MANIFEST_NAME, NAME_RE
from wai_dispatch.codec.sets.regular import NotRegularFile, open_regular

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class SetLimits:
    """What installing or opening one set may read: per file, in all, and in an archive."""

    max_file_bytes: int = 1 << 30
    max_total_bytes: int = 4 << 30
    max_files: int = 1024
    max_archive_members: int = 4096
    max_manifest_bytes: int = 1 << 20


def _open_regular(path: Path) -> IO[bytes]:
    try:
        return open_regular(path)
    except NotRegularFile as exc:
        raise SetUnsafeEntry(f"{path.name}: {exc.strerror}") from None


@dataclass
class Staged:
    """What :func:`stage` copied: the set's directory (inside the staging directory), each
    file's BLAKE3 and size by name, and the source's set.json bytes (not copied)."""

    directory: Path
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    manifest_bytes: bytes = b""


@dataclass
class _Budget:
    limits: SetLimits
    files: int = 0
    total: int = 0

    def admit(self, name: str, declared: int | None) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise SetTooLarge(f"more than {self.limits.max_files} files")
        if declared is not None:  # an archive states sizes: refuse before extracting
            self._check(name, declared, self.total + declared)

    def _check(self, name: str, size: int, total: int) -> None:
        if size > self.limits.max_file_bytes:
            raise SetTooLarge(f"{name}: over the per-file limit of {self.limits.max_file_bytes}")
        if total > self.limits.max_total_bytes:
            raise SetTooLarge(f"the set is over its limit of {self.limits.max_total_bytes} bytes")

    def count(self, name: str, size: int, written: int) -> None:
        self._check(name, size, self.total + written)


def stage(source: Path, dest: Path, limits: SetLimits) -> Staged:
    """Copy ``source`` (a directory or an archive) into the new directory ``dest``."""
    dest.mkdir()
    budget = _Budget(limits)
    if source.is_dir():
        staged = Staged(dest)
        _stage_directory(source, staged, budget)
    elif source.is_file():
        staged = _stage_archive(source, dest, budget)
    else:
        raise SetArchiveInvalid(f"{source}: no such directory or archive")
    if len(staged.manifest_bytes) > limits.max_manifest_bytes:
        raise SetTooLarge(f"{MANIFEST_NAME}: over the limit of {limits.max_manifest_bytes} bytes")
    return staged


def _stage_directory(source: Path, staged: Staged, budget: _Budget) -> None:
    stack = [""]
    found_manifest = False
    while stack:
        rel_dir = stack.pop()
        with os.scandir(source / rel_dir if rel_dir else source) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise SetUnsafeEntry(f"{rel!r}: a link cannot be in a set")
                if stat.S_ISDIR(mode):
                    stack.append(rel)
                    continue
                if not stat.S_ISREG(mode):
                    raise SetUnsafeEntry(f"{rel!r}: a device, pipe or socket cannot be in a set")
                if rel == MANIFEST_NAME:
                    with _open_regular(source / rel) as fh:
                        staged.manifest_bytes = fh.read(budget.limits.max_manifest_bytes + 1)
                    found_manifest = True
                    continue
                _check_name(rel)
                budget.admit(rel, None)
                with _open_regular(source / rel) as fh:
                    staged.files[rel] = _copy(fh, staged.directory / rel, rel, budget)
    if not found_manifest:
        raise SetFileMissing(f"{source}: no {MANIFEST_NAME}")


def _stage_archive(source: Path, dest: Path, budget: _Budget) -> Staged:
    raw = Staged(dest)
    try:
        if zipfile.is_zipfile(source):
            members = _zip_members(source, budget)
        else:
            members = _tar_members(source, budget)
        for name, size, stream in members:
            with stream:
                _check_name(name, archive=True)
                if name in raw.files:
                    raise SetArchiveInvalid(f"{name}: twice in the archive")
                budget.admit(name, size)
                raw.files[name] = _copy(stream, dest / name, name, budget)
    except (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error) as exc:
        raise SetArchiveInvalid(f"{source.name}: not a readable archive ({exc})") from None
    except (EOFError, NotImplementedError, RuntimeError) as exc:  # truncated, method, password
        raise SetArchiveInvalid(f"{source.name}: not a readable archive ({exc})") from None
    except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        raise SetArchiveInvalid(f"{source.name}: a name is both a file and a folder") from exc
    except OSError as exc:
        if isinstance(exc, PermissionError):
            raise
        raise SetArchiveInvalid(f"{source.name}: not a readable archive ({exc})") from None
    return _strip_prefix(raw)


def _strip_prefix(raw: Staged) -> Staged:
    """A set archived with its folder (``name/set.json``, ``name/...``) is that folder's set."""
    if MANIFEST_NAME in raw.files:
        prefix = ""
    else:
        tops = {name.split("/", 1)[0] for name in raw.files}
        prefix = next(iter(tops)) + "/" if len(tops) == 1 else ""
        if not prefix or prefix + MANIFEST_NAME not in raw.files:
            raise SetFileMissing(f"no {MANIFEST_NAME} in the archive")
    manifest_path = raw.directory / prefix / MANIFEST_NAME
    with _open_regular(manifest_path) as fh:
        manifest_bytes = fh.read()
    manifest_path.unlink()
    files = {
        name[len(prefix) :]: value
        for name, value in raw.files.items()
        if name != prefix + MANIFEST_NAME
    }
    for name in files:
        if not NAME_RE.fullmatch(name):
            raise SetFileUnexpected(f"{name[:80]!r}: not an allowed file name in a set")
    return Staged(raw.directory / prefix if prefix else raw.directory, files, manifest_bytes)


def _tar_members(source: Path, budget: _Budget) -> Iterator[tuple[str, int, IO[bytes]]]:
    with tarfile.open(source, "r:*") as tf:
        seen = 0
        for member in tf:
            seen += 1
            if seen > budget.limits.max_archive_members:
                raise SetTooLarge(f"more than {budget.limits.max_archive_members} entries")
            name = _member_name(member.name)
            if member.issym() or member.islnk():
                raise SetUnsafeEntry(f"{member.name!r}: a link cannot be in a set")
            if member.isdir():
                continue
            if not member.isfile():
                raise SetUnsafeEntry(f"{member.name!r}: a device or pipe cannot be in a set")
            if name is None:
                raise SetUnsafeEntry(f"{member.name!r}: not a file name")
            stream = tf.extractfile(member)
            if stream is None:
                raise SetArchiveInvalid(f"{member.name!r}: cannot be read")
            yield name, member.size, stream


def _zip_members(source: Path, budget: _Budget) -> Iterator[tuple[str, int, IO[bytes]]]:
    with zipfile.ZipFile(source) as zf:
        infos = zf.infolist()
        if len(infos) > budget.limits.max_archive_members:
            raise SetTooLarge(f"more than {budget.limits.max_archive_members} entries")
        for info in infos:
            name = _member_name(info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise SetUnsafeEntry(f"{info.filename!r}: a link cannot be in a set")
            if info.is_dir() or stat.S_ISDIR(mode):
                continue
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                raise SetUnsafeEntry(f"{info.filename!r}: a device or pipe cannot be in a set")
            if name is None:
                raise SetUnsafeEntry(f"{info.filename!r}: not a file name")
            yield name, info.file_size, zf.open(info)


def _member_name(raw: str) -> str | None:
    """An archive member's name relative to the archive's root; traversal and absolute names
    are refused here, before anything is written (``None``: the root itself)."""
    if "\\" in raw or "\x00" in raw or raw.startswith("/") or raw[1:2] == ":":
        raise SetUnsafeEntry(f"{raw[:80]!r}: an absolute or non-POSIX name")
    name = raw
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    if name in ("", "."):
        return None
    parts = name.split("/")
    if ".." in parts:
        raise SetUnsafeEntry(f"{raw[:80]!r}: a name that leaves the set's folder")
    if any(p in ("", ".") for p in parts):
        raise SetUnsafeEntry(f"{raw[:80]!r}: not a plain relative name")
    return name


def _check_name(name: str, *, archive: bool = False) -> None:
    # In an archive the set may sit in one folder, so set.json is allowed one level down;
    # _strip_prefix checks the final names.
    ok = bool(NAME_RE.fullmatch(name)) or name == MANIFEST_NAME
    if not ok and archive:
        head, _, tail = name.partition("/")
        ok = bool(NAME_RE.fullmatch(head)) and bool(
            NAME_RE.fullmatch(tail) or tail == MANIFEST_NAME
        )
    if not ok:
        raise SetFileUnexpected(f"{name[:80]!r}: not an allowed file name in a set")


def _copy(src: IO[bytes], target: Path, name: str, budget: _Budget) -> tuple[str, int]:
    target.parent.mkdir(parents=True, exist_ok=True)
    hasher = blake3.blake3()
    size = 0
    with open(target, "xb") as out:
        while chunk := src.read(_CHUNK):
            size += len(chunk)
            budget.count(name, size, size)
            hasher.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    budget.total += size
    return hasher.hexdigest(), size
