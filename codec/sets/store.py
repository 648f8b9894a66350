"""The local set store: one folder per set, named by its digest (``<data_dir>/sets/<digest>/``),
installs staged and renamed into place, a damaged set reported and repairable, and each
capability's default set (docs/sets.md)."""

from __future__ import annotations

import builtins
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from wai_dispatch.codec.sets.errors import (
    SetAmbiguous,
    SetCapabilityMismatch,
    SetDamaged,
    SetDigestInvalid,
    SetError,
    SetFileMismatch,
    SetFileMissing,
    SetFileUnexpected,
    SetNotInstalled,
    SetUnsafeEntry,
    one_line,
)
from wai_dispatch.codec.sets.loaded import LoadedSet, load, read_exact
from wai_dispatch.codec.sets.manifest import (
    DIGEST_RE,
    MANIFEST_NAME,
    Manifest,
    canonical_json,
    check_digest,
    hash_file,
    walk,
)
from wai_dispatch.codec.sets.regular import NotRegularFile, atomic_write, fsync_dir
from wai_dispatch.codec.sets.stage import SetLimits, stage
from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.rules import Pin


@dataclass(frozen=True, slots=True)
class InstalledSet:
    """A set in the store: its digest, its folder and its manifest."""

    digest: str
    path: Path
    manifest: Manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def capability(self) -> str:
        return self.manifest.capability

    @property
    def version(self) -> str:
        return self.manifest.version

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "name": self.name,
            "capability": self.capability,
            "version": self.version,
            "files": len(self.manifest.files),
            "bytes": self.manifest.total_size,
            "path": str(self.path),
        }


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing :meth:`SetStore.verify` found: the file and the error code it would raise."""

    name: str
    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"file": self.name, "code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class Verification:
    digest: str
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "ok": self.ok,
            "problems": [p.to_json() for p in self.problems],
        }


_DEFAULTS = "defaults.json"
_DEFAULT_LIMITS: Final = SetLimits()


class SetStore:
    """Sets on this machine, one folder each, named by digest: ``<root>/<digest>/``.

    ``root`` is ``<data_dir>/sets`` (:func:`codec.layout.set_store_dir`). Installs stage into a
    dot-folder under ``root`` and rename into place, so a set is either wholly there or absent.
    """

    def __init__(self, root: str | os.PathLike[str], *, limits: SetLimits = _DEFAULT_LIMITS):
        self.root = Path(root)
        self.limits = limits

    def __repr__(self) -> str:
        return f"SetStore({str(self.root)!r})"

    # -- installing

    def install(self, source: str | os.PathLike[str], *, check: bool = True) -> InstalledSet:
        """Install from a set folder or a .tar/.tar.gz/.zip archive of one; every file checked
        against the manifest first. A set already installed is re-verified (``check``; without
        it, only its manifest and each file's type and size are looked at): intact, it is
        returned unchanged; damaged, the new copy replaces it."""
        source = Path(source)
        if source.is_dir():  # cheap when already installed: the manifest alone gives the digest
            data = read_exact(source / MANIFEST_NAME, self.limits.max_manifest_bytes)
            if data is not None and len(data) <= self.limits.max_manifest_bytes:
                digest = Manifest.from_bytes(data, where=str(source / MANIFEST_NAME)).digest
                if self._present(digest) and self.intact(digest, full=check):
                    return self.get(digest)
        self.root.mkdir(parents=True, exist_ok=True)
        self._sweep()
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".install-"))
        try:
            staged = stage(source, tmp / "set", self.limits)
            manifest = Manifest.from_bytes(staged.manifest_bytes, where=str(source))
            _check_staged(manifest, staged.files)
            (staged.directory / MANIFEST_NAME).write_bytes(manifest.canonical())
            target = self.root / manifest.digest
            if self._exists(manifest.digest):
                if self.intact(manifest.digest, full=check):
                    return self.get(manifest.digest)
                # Damaged: the damaged folder goes aside and the checked copy takes its place.
                os.rename(target, tmp / "damaged")
            try:
                os.rename(staged.directory, target)
            except OSError:
                if not self._present(manifest.digest):  # not a concurrent install of the same
                    raise
            fsync_dir(self.root)
            return self.get(manifest.digest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def intact(self, digest: str, *, full: bool = True) -> bool:
        """Whether the installed set reads as its manifest says: every file re-hashed
        (``full``), else its manifest read and each file's type and size checked."""
        if full:
            try:
                return self.verify(digest).ok
            except SetError:
                return False
        try:
            manifest = self.get(digest).manifest
        except SetError:
            return False
        if manifest.digest != digest:
            return False
        path = self.root / digest
        for name, entry in manifest.files.items():
            try:
                st = os.lstat(path / name)
            except OSError:
                return False
            if not (stat.S_ISREG(st.st_mode) and st.st_size == entry.size):
                return False
        return True

    # -- reading

    def list(self) -> list[InstalledSet]:
        """Every installed set whose manifest reads, by name then digest. A folder whose
        set.json does not read is left out; :meth:`damaged` and :meth:`verify` say why."""
        out = []
        for digest in self._digests():
            try:
                out.append(self.get(digest))
            except SetError:
                continue
        return sorted(out, key=lambda s: (s.name, s.digest))

    def damaged(self) -> dict[str, Problem]:
        """The set folders whose manifest does not read, each with what is wrong."""
        out = {}
        for digest in self._digests():
            try:
                self.get(digest)
            except SetError as exc:
                out[digest] = Problem(MANIFEST_NAME, exc.code, exc.message)
        return out

    def get(self, digest: str) -> InstalledSet:
        path = self.root / check_digest(digest)
        data = read_exact(path / MANIFEST_NAME, self.limits.max_manifest_bytes)
        if data is None:
            raise SetNotInstalled(f"set {digest} is not installed here")
        return InstalledSet(digest, path, Manifest.from_bytes(data, where=f"{digest[:16]}…"))

    def resolve(self, prefix: str) -> str:
        """The installed digest that starts with ``prefix`` (at least 4 hex digits)."""
        if DIGEST_RE.fullmatch(prefix):
            return prefix
        if not re.fullmatch(r"[0-9a-f]{4,63}", prefix):
            raise SetDigestInvalid(f"{prefix[:80]!r} is not a set digest or a prefix of one")
        found = [d for d in self._digests() if d.startswith(prefix)]
        if not found:
            raise SetNotInstalled(f"no installed set's digest starts with {prefix}")
        if len(found) > 1:
            raise SetAmbiguous(f"{len(found)} installed sets' digests start with {prefix}")
        return found[0]

    def open(self, digest: str, *, pin: Pin | None = None) -> LoadedSet:
        """The set for a decode, every file read once and verified (:func:`load`)."""
        path = self.root / check_digest(digest)
        if not self._exists(digest):
            raise SetNotInstalled(f"set {digest} is not installed here")
        try:
            return load(
                path,
                digest,
                pin=pin,
                max_manifest_bytes=self.limits.max_manifest_bytes,
                max_total_bytes=self.limits.max_total_bytes,
            )
        except (SetFileMismatch, SetFileMissing) as exc:  # installed, so the store is at fault
            raise SetDamaged(f"installed {exc.message}; reinstall it") from None

    def verify(self, digest: str) -> Verification:
        """Re-hash every file; every difference is reported, by file. A FIFO, device or link
        in place of a file is tampering (``set_unsafe_entry``), reported without opening it."""
        path = self.root / check_digest(digest)
        if not path.is_dir():
            raise SetNotInstalled(f"set {digest} is not installed here")
        problems: list[Problem] = []

        def problem(name: str, err: type[SetError], message: str) -> None:
            problems.append(Problem(name, err.code, message))

        try:
            manifest = self.get(digest).manifest
        except SetError as exc:
            return Verification(digest, (Problem(MANIFEST_NAME, exc.code, exc.message),))
        if manifest.digest != digest:
            problem(MANIFEST_NAME, SetFileMismatch, "set.json does not hash to the digest")
        for name, entry in sorted(manifest.files.items()):
            try:
                got, size = hash_file(path / name)
            except FileNotFoundError:
                problem(name, SetFileMissing, f"{name} is missing")
                continue
            except NotRegularFile as exc:
                problem(name, SetUnsafeEntry, f"{name}: {exc.strerror} (tampering)")
                continue
            except (OSError, SetError) as exc:
                problem(name, SetUnsafeEntry, f"{name}: {one_line(exc)}")
                continue
            if size != entry.size or got != entry.blake3:
                problem(name, SetFileMismatch, f"{name} differs from its manifest entry")
        try:
            extra = set(walk(path, strict=False)) - set(manifest.files)
        except OSError as exc:
            problem("?", SetUnsafeEntry, one_line(exc))
            extra = set()
        for name in sorted(extra):
            problem(name, SetFileUnexpected, f"{name} is not in the manifest")
        return Verification(digest, tuple(problems))

    # -- removing and defaults

    def remove(self, digest: str) -> None:
        """Take the set out of the store (renamed aside first, so it vanishes at once)."""
        path = self.root / check_digest(digest)
        if not path.is_dir():
            raise SetNotInstalled(f"set {digest} is not installed here")
        aside = Path(tempfile.mkdtemp(dir=self.root, prefix=".remove-"))
        os.rename(path, aside / digest)
        shutil.rmtree(aside, ignore_errors=True)
        defaults = self._defaults()
        if digest in defaults.values():
            self._write_defaults({c: d for c, d in defaults.items() if d != digest})

    def default_for(self, capability: str) -> InstalledSet:
        """The set a decode of ``capability`` uses when its envelope names none: the one
        chosen with :meth:`set_default`, else the only installed set of the capability.
        Several and none chosen is :class:`SetAmbiguous`, never a guess (docs/sets.md)."""
        chosen = self._defaults().get(capability)
        if chosen is not None and self._present(chosen):
            return self.get(chosen)
        found = [s for s in self.list() if s.capability == capability]
        if not found:
            raise SetNotInstalled(f"no set of {capability} is installed here")
        if len(found) > 1:
            digests = ", ".join(s.digest[:12] for s in found)
            raise SetAmbiguous(
                f"{len(found)} sets of {capability} are installed ({digests}) and none is the "
                "default: name the set in the envelope or choose one with `sets default`"
            )
        return found[0]

    def set_default(self, capability: str, digest: str) -> InstalledSet:
        chosen = self.get(digest)
        if chosen.capability != capability:
            raise SetCapabilityMismatch(
                f"set {digest[:16]}… is {chosen.capability}'s, not {capability}'s"
            )
        self._write_defaults({**self._defaults(), capability: digest})
        return chosen

    def defaults(self) -> dict[str, str]:
        """The defaults chosen with :meth:`set_default`, by capability."""
        return dict(self._defaults())

    # -- internals

    def _sweep(self) -> None:
        # An install or removal killed midway (power loss, SIGKILL) leaves its dot-folder;
        # one untouched for an hour is no live operation's.
        cutoff = time.time() - 3600.0
        for prefix in (".install-", ".remove-"):
            for leftover in self.root.glob(prefix + "*"):
                try:
                    if leftover.lstat().st_mtime < cutoff:
                        shutil.rmtree(leftover, ignore_errors=True)
                except OSError:
                    continue

    def _present(self, digest: str) -> bool:
        try:
            return stat.S_ISREG((self.root / digest / MANIFEST_NAME).lstat().st_mode)
        except OSError:
            return False

    def _exists(self, digest: str) -> bool:
        """A folder for the digest is there, whatever state it is in."""
        return os.path.lexists(self.root / digest)

    def _digests(self) -> builtins.list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if DIGEST_RE.fullmatch(p.name))

    def _defaults(self) -> dict[str, str]:
        path = self.root / _DEFAULTS
        try:
            data = read_exact(path, 1 << 20)
            obj = strictjson.loads(data) if data is not None else {}
        except (SetError, ValueError):
            return {}
        if not isinstance(obj, dict):
            return {}
        return {
            c: d
            for c, d in obj.items()
            if isinstance(c, str) and isinstance(d, str) and DIGEST_RE.fullmatch(d)
        }

    def _write_defaults(self, defaults: dict[str, str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write(self.root / _DEFAULTS, canonical_json(defaults))


def _check_staged(manifest: Manifest, staged: Mapping[str, tuple[str, int]]) -> None:
    for name in sorted(set(staged) - set(manifest.files)):
        raise SetFileUnexpected(f"{name} is not in the manifest")
    for name, entry in sorted(manifest.files.items()):
        if name not in staged:
            raise SetFileMissing(f"{name} is listed in the manifest but absent")
        digest, size = staged[name]
        if size != entry.size or digest != entry.blake3:
            raise SetFileMismatch(
                f"{name}: {size} bytes, blake3 {digest[:16]}…; the manifest says "
                f"{entry.size} bytes, {entry.blake3[:16]}…"
            )
