"""Staging a parameter set for the store: its files copied from a directory or a .tar, .tar.gz
or .zip archive into a temporary directory, every name, type and size checked on the way.

Nothing here decides what a set is: :meth:`codec.sets.store.SetStore.install` stages, then
checks the staged files against the manifest, then renames the directory into place
(docs/sets.md).
"""

from __future__ import annotations

import contextlib
import functools
import lzma
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import blake3

from wai_dispatch.codec.sets.errors import (
    SetArchiveInvalid,
    SetError,
    SetFileMismatch,
    SetFileMissing,
    SetFileUnexpected,
    SetTooLarge,
    SetUnsafeEntry,
)
from wai_dispatch.codec.sets.manifest import MANIFEST_NAME, NAME_RE, Manifest
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
    declared: int = 0  # the sizes an archive's headers state, summed before extracting

    def admit(self, name: str, declared: int | None) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise SetTooLarge(f"more than {self.limits.max_files} files")
        if declared is not None:  # an archive states sizes: refuse before extracting
            self.declared += declared
            self._check(name, declared, self.declared)

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
    """Read every member's header first, then the manifest from its member, and check each
    other member's name and size against it; only then extract (nothing unlisted, and nothing
    of the wrong size, is ever written: a compressed bomb is refused from its header)."""
    try:
        with contextlib.ExitStack() as stack:
            if zipfile.is_zipfile(source):
                members = _zip_members(stack.enter_context(zipfile.ZipFile(source)), budget)
            else:
                members = _tar_members(stack.enter_context(tarfile.open(source, "r:*")), budget)
            prefix, manifest_bytes = _manifest_member(members, budget)
            listed = Manifest.from_bytes(manifest_bytes, where=f"{source.name}: {MANIFEST_NAME}")
            wanted = [m for m in members if m.name != prefix + MANIFEST_NAME]
            for member in wanted:
                rel = member.name[len(prefix) :]
                entry = listed.files.get(rel)
                if entry is None:
                    raise SetFileUnexpected(f"{rel[:80]!r} is not in the manifest")
                if member.size != entry.size:
                    raise SetFileMismatch(
                        f"{rel}: {member.size} bytes in the archive; the manifest says {entry.size}"
                    )
            files: dict[str, tuple[str, int]] = {}
            for member in wanted:
                with member.open() as stream:
                    files[member.name] = _copy(stream, dest / member.name, member.name, budget)
    except SetError:
        raise
    except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        raise SetArchiveInvalid(f"{source.name}: a name is both a file and a folder") from exc
    except PermissionError:
        raise
    except UnicodeDecodeError:
        raise SetArchiveInvalid(f"{source.name}: a member's name is not UTF-8") from None
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        lzma.LZMAError,
        EOFError,  # truncated
        NotImplementedError,  # a compression method zipfile does not have
        RuntimeError,  # encrypted
        OSError,  # bz2 and gzip say "not a valid stream" this way
        ValueError,
    ) as exc:
        raise SetArchiveInvalid(
            f"{source.name}: not a readable archive ({_one_line(exc)})"
        ) from None
    directory = dest / prefix if prefix else dest
    return Staged(directory, {n[len(prefix) :]: v for n, v in files.items()}, manifest_bytes)


@dataclass
class _Member:
    """An archive member's header: its name in the archive, its size, and how to read it."""

    name: str
    size: int
    open: Callable[[], IO[bytes]]


def _manifest_member(members: list[_Member], budget: _Budget) -> tuple[str, bytes]:
    """The folder prefix of the set in the archive (``""`` or ``name/``) and its set.json's
    bytes. A set archived with its folder (``name/set.json``, ``name/...``) is that folder's
    set; every member must lie in that folder."""
    names = [m.name for m in members]
    seen: set[str] = set()
    for name in names:
        _check_name(name, archive=True)
        if name in seen:
            raise SetArchiveInvalid(f"{name}: twice in the archive")
        seen.add(name)
    if MANIFEST_NAME in seen:
        prefix = ""
    else:
        tops = {name.split("/", 1)[0] for name in names}
        prefix = next(iter(tops)) + "/" if len(tops) == 1 else ""
        if not prefix or prefix + MANIFEST_NAME not in seen:
            raise SetFileMissing(f"no {MANIFEST_NAME} in the archive")
    for name in names:
        if not name.startswith(prefix) or (
            not NAME_RE.fullmatch(name[len(prefix) :]) and (name != prefix + MANIFEST_NAME)
        ):
            raise SetFileUnexpected(f"{name[:80]!r}: not an allowed file name in a set")
    (member,) = [m for m in members if m.name == prefix + MANIFEST_NAME]
    limit = budget.limits.max_manifest_bytes
    if member.size > limit:
        raise SetTooLarge(f"{MANIFEST_NAME}: over the limit of {limit} bytes")
    with member.open() as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise SetTooLarge(f"{MANIFEST_NAME}: over the limit of {limit} bytes")
    return prefix, bytes(data)


def _tar_members(tf: tarfile.TarFile, budget: _Budget) -> list[_Member]:
    out: list[_Member] = []
    seen = 0
    for member in tf:
        seen += 1
        if seen > budget.limits.max_archive_members:
            raise SetTooLarge(f"more than {budget.limits.max_archive_members} entries")
        name = _member_name(member.name)
        if member.issym() or member.islnk():
            raise SetUnsafeEntry(f"{member.name[:80]!r}: a link cannot be in a set")
        if member.isdir():
            continue
        if not member.isfile():
            raise SetUnsafeEntry(f"{member.name[:80]!r}: a device or pipe cannot be in a set")
        if name is None:
            raise SetUnsafeEntry(f"{member.name[:80]!r}: not a file name")
        budget.admit(name, member.size)
        out.append(_Member(name, member.size, functools.partial(_tar_stream, tf, member)))
    return out


def _tar_stream(tf: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    stream = tf.extractfile(member)
    if stream is None:
        raise SetArchiveInvalid(f"{member.name[:80]!r}: cannot be read")
    return stream


def _zip_members(zf: zipfile.ZipFile, budget: _Budget) -> list[_Member]:
    infos = zf.infolist()
    if len(infos) > budget.limits.max_archive_members:
        raise SetTooLarge(f"more than {budget.limits.max_archive_members} entries")
    out: list[_Member] = []
    for info in infos:
        name = _member_name(info.filename)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise SetUnsafeEntry(f"{info.filename[:80]!r}: a link cannot be in a set")
        if info.is_dir() or stat.S_ISDIR(mode):
            continue
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
            raise SetUnsafeEntry(f"{info.filename[:80]!r}: a device or pipe cannot be in a set")
        if name is None:
            raise SetUnsafeEntry(f"{info.filename[:80]!r}: not a file name")
        budget.admit(name, info.file_size)
        out.append(_Member(name, info.file_size, functools.partial(zf.open, info)))
    return out


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:200]


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
    # _manifest_member checks the final names.
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
