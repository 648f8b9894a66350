"""A set opened for a decode: every file read once, checked against the manifest (and the pin),
and kept in memory, so the bytes a decode reads are exactly the bytes that were verified
(docs/sets.md, *Opening a set*; §6.1)."""

from __future__ import annotations

import os
import stat
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from wai_dispatch.codec.sets.errors import (
    PinMismatch,
    SetFileMismatch,
    SetFileMissing,
    SetTooLarge,
    SetUnsafeEntry,
)
from wai_dispatch.codec.sets.manifest import MANIFEST_NAME, Manifest, hash_bytes
from wai_dispatch.codec.sets.regular import NotRegularFile, open_regular
from wai_dispatch.dispatch.rules import Pin
from wai_dispatch.setfacts.facts import SetFacts


class Stamp(NamedTuple):
    """What ``lstat`` said of a file when it was read: a file replaced, rewritten or swapped
    for something else since has another stamp."""

    dev: int
    ino: int
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        return cls(st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class LoadedSet:
    """A set whose every file was read once and checked against its manifest (and the pin).

    :meth:`read` returns exactly those bytes: nothing is read from disk between the check and
    the use, so a file changed after :func:`load` changes nothing (§6.1: the bytes a pin
    verified are the bytes the decode reads). ``stamps`` record each file as it was read, so a
    holder can tell cheaply whether the folder still holds the same files (:meth:`unchanged`).
    """

    __slots__ = ("_files", "digest", "directory", "manifest", "stamps")

    def __init__(
        self,
        manifest: Manifest,
        files: Mapping[str, bytes],
        *,
        directory: Path | None = None,
        stamps: Mapping[str, Stamp] | None = None,
    ) -> None:
        self.manifest = manifest
        self.digest = manifest.digest
        self._files = dict(files)
        self.directory = directory
        self.stamps = dict(stamps or {})

    @classmethod
    def from_files(
        cls,
        files: Mapping[str, bytes],
        *,
        facts: Mapping[str, Any] | SetFacts | None = None,
        capability: str = "wai.neural.bmshj2018",
        name: str = "in-memory",
    ) -> LoadedSet:
        """A set held in memory (tests, benchmarks): its manifest is written from ``files``
        (a usage statement is added when absent), so its digest is a real one."""
        files = dict(files)
        files.setdefault("wai-usage.json", b"{}")
        facts_json = facts.to_json() if isinstance(facts, SetFacts) else dict(facts or {})
        manifest = Manifest.validated(
            {
                "name": name,
                "capability": capability,
                "version": "1",
                "facts": facts_json,
                "files": {n: {"blake3": hash_bytes(d), "size": len(d)} for n, d in files.items()},
            }
        )
        return cls(manifest, files)

    @property
    def capability(self) -> str:
        return self.manifest.capability

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def facts(self) -> SetFacts:
        return self.manifest.facts

    @property
    def files(self) -> Mapping[str, bytes]:
        """Every file's verified bytes, by name (read-only)."""
        return types.MappingProxyType(self._files)

    @property
    def names(self) -> list[str]:
        return sorted(self._files)

    def has(self, name: str) -> bool:
        return name in self._files

    def read(self, name: str) -> bytes:
        try:
            return self._files[name]
        except KeyError:
            raise SetFileMissing(f"set {self.digest[:16]}… has no file {name!r}") from None

    def unchanged(self) -> bool:
        """Whether every file of the folder it was read from is still the one read (one
        ``lstat`` each, nothing hashed). An in-memory set is always unchanged."""
        if self.directory is None:
            return True
        for name, stamp in self.stamps.items():
            try:
                if Stamp.of(os.lstat(self.directory / name)) != stamp:
                    return False
            except OSError:
                return False
        return True

    def __repr__(self) -> str:
        return f"LoadedSet({self.manifest.name!r}, {self.digest[:16]}…)"


def load(
    directory: Path,
    digest: str,
    *,
    pin: Pin | None = None,
    max_manifest_bytes: int = 1 << 20,
    max_total_bytes: int | None = None,
) -> LoadedSet:
    """Read set.json and every file of the set at ``directory`` once, check them against
    ``digest`` (and ``pin``), and keep the bytes (docs/sets.md, *Opening a set*)."""
    stamps: dict[str, Stamp] = {}
    manifest_bytes = read_exact(directory / MANIFEST_NAME, max_manifest_bytes, stamps)
    if manifest_bytes is None:
        raise SetFileMissing(f"set {digest[:16]}…: {MANIFEST_NAME} is missing")
    manifest = Manifest.from_bytes(manifest_bytes)
    if manifest.digest != digest:
        raise SetFileMismatch(f"set {digest[:16]}…: {MANIFEST_NAME} does not hash to the digest")
    check_pin(manifest, pin)
    if max_total_bytes is not None and manifest.total_size > max_total_bytes:
        raise SetTooLarge(f"set {digest[:16]}…: {manifest.total_size} bytes over the limit")
    files: dict[str, bytes] = {}
    for name, entry in sorted(manifest.files.items()):
        data = read_exact(directory / name, entry.size, stamps, name=name)
        if data is None:
            raise SetFileMissing(f"set {digest[:16]}…: {name} is missing")
        if len(data) != entry.size or hash_bytes(data) != entry.blake3:
            raise SetFileMismatch(f"set {digest[:16]}…: {name} differs from its manifest entry")
        files[name] = data
    return LoadedSet(manifest, files, directory=directory, stamps=stamps)


def check_pin(manifest: Manifest, pin: Pin | None) -> None:
    """§2: a pin names one capability's set by its digest; the set must be that one."""
    if pin is None:
        return
    if pin.digest != manifest.digest:
        raise PinMismatch(
            f"the pin over {pin.capability} names set {pin.digest[:16]}…, "
            f"not {manifest.digest[:16]}…"
        )
    if pin.capability != manifest.capability:
        raise PinMismatch(
            f"the pin is over {pin.capability}; set {manifest.digest[:16]}… is "
            f"{manifest.capability}'s"
        )


def read_exact(
    path: Path, expected: int, stamps: dict[str, Stamp] | None = None, *, name: str | None = None
) -> bytes | None:
    """The file's bytes, reading at most one byte past ``expected`` (so an oversize file is
    seen without reading it all); ``None`` when it does not exist. Anything but a regular file
    in its place (a FIFO, a device, a link, a folder) is :class:`SetUnsafeEntry`: tampering,
    refused without blocking on it."""
    label = name or path.name
    try:
        fh = open_regular(path)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise SetUnsafeEntry(f"{label}: {exc.strerror} (the store was tampered with)") from None
    except OSError as exc:
        raise SetUnsafeEntry(f"{label}: cannot be read ({exc.strerror})") from None
    with fh:
        st = os.fstat(fh.fileno())
        data = bytes(fh.read(expected + 1))
    if stamps is not None and stat.S_ISREG(st.st_mode):
        stamps[label] = Stamp.of(st)
    return data
