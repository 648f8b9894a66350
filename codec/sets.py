"""Parameter sets (``wai-set/1``): the manifest and its digest, the manifest writer, the local
store, and a set opened for a decode, every file verified once and kept in memory
(docs/sets.md). Copying a source into the store safely is :mod:`codec.store`'s.

Error tree (all :class:`codec.errors.CodecError`)::

    SetError                 set_invalid: base
    ├── ManifestInvalid      set_manifest_invalid: set.json is not a valid wai-set/1 manifest
    ├── SetFileMismatch      set_file_mismatch: a file's bytes are not the manifest's (named)
    ├── SetFileMissing       set_file_missing: a file the manifest lists is absent (named)
    ├── SetFileUnexpected    set_file_unexpected: a file the manifest does not list (named)
    ├── SetUnsafeEntry       set_unsafe_entry: traversal, absolute name, link, device file
    ├── SetTooLarge          set_too_large: a file, the set or an archive over its limit
    ├── SetArchiveInvalid    set_archive_invalid: a source that is no readable directory/archive
    ├── SetDigestInvalid     set_digest_invalid: not a digest (or digest prefix)
    ├── SetNotInstalled      set_not_installed: no such set in the store
    ├── SetAmbiguous         set_ambiguous: several sets fit and none is the default
    └── PinMismatch          pin_mismatch: the set is not the one the pin names (§2)
"""

from __future__ import annotations

import builtins
import json
import math
import os
import re
import shutil
import stat
import tempfile
import time
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import blake3
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from wai_dispatch.codec import strictjson
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch.rules import Pin

SET_FORMAT: Final = "wai-set/1"
MANIFEST_NAME: Final = "set.json"
DIGEST_RE: Final = re.compile(r"[0-9a-f]{64}")
# A file name in a set: relative, '/'-separated, each segment of letters, digits, '.', '_',
# '-' and not starting with '.', so no '..', no hidden files, nothing a filesystem reads twice.
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
NAME_RE: Final = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT}){{0,7}}")
_CHUNK: Final = 1 << 20
_MAX_FACT_DEPTH: Final = 32


class SetError(CodecError):
    code = "set_invalid"


class ManifestInvalid(SetError):
    code = "set_manifest_invalid"


class SetFileMismatch(SetError):
    code = "set_file_mismatch"


class SetFileMissing(SetError):
    code = "set_file_missing"


class SetFileUnexpected(SetError):
    code = "set_file_unexpected"


class SetUnsafeEntry(SetError):
    code = "set_unsafe_entry"


class SetTooLarge(SetError):
    code = "set_too_large"


class SetArchiveInvalid(SetError):
    code = "set_archive_invalid"


class SetDigestInvalid(SetError):
    code = "set_digest_invalid"


class SetNotInstalled(SetError, LookupError):
    code = "set_not_installed"


class SetAmbiguous(SetError, LookupError):
    code = "set_ambiguous"


class PinMismatch(SetError):
    code = "pin_mismatch"


Digest = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


class FileEntry(BaseModel):
    """One file of a set: the BLAKE3 (hex) of its bytes and its size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    blake3: Digest
    size: StrictInt = Field(ge=0)


class Manifest(BaseModel):
    """``set.json``. Its digest, the set's, is the BLAKE3 of :meth:`canonical`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["wai-set/1"] = SET_FORMAT
    name: StrictStr = Field(min_length=1, max_length=128)
    capability: StrictStr = Field(min_length=1, max_length=256)
    version: StrictStr = Field(min_length=1, max_length=64)
    facts: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, FileEntry]
    usage: StrictStr = "wai-usage.json"

    @field_validator("facts")
    @classmethod
    def _facts_are_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        _check_json_value(value, 0)
        return value

    @field_validator("files")
    @classmethod
    def _names_are_safe(cls, value: dict[str, FileEntry]) -> dict[str, FileEntry]:
        for name in value:
            if not is_safe_name(name):
                raise ValueError(f"{name[:80]!r} is not an allowed file name")
        return value

    @model_validator(mode="after")
    def _usage_is_a_file(self) -> Manifest:
        if self.usage not in self.files:
            raise ValueError(f"usage statement {self.usage!r} is not among the files")
        return self

    def canonical(self) -> bytes:
        """Sorted keys, no whitespace, UTF-8 (not ASCII-escaped): the bytes the digest hashes
        and, in the store, exactly the bytes of set.json."""
        return canonical_json(self.model_dump(mode="json"))

    @property
    def digest(self) -> str:
        return blake3.blake3(self.canonical()).hexdigest()

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files.values())

    @classmethod
    def from_bytes(cls, data: bytes, *, where: str = MANIFEST_NAME) -> Manifest:
        try:
            obj = strictjson.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ManifestInvalid(f"{where}: not JSON: {_one_line(exc)}") from None
        if not isinstance(obj, dict):
            raise ManifestInvalid(f"{where}: not a JSON object")
        if obj.get("format") != SET_FORMAT:
            raise ManifestInvalid(f"{where}: format is not {SET_FORMAT!r}")
        return cls.validated(obj, where=where)

    @classmethod
    def validated(cls, obj: Mapping[str, Any], *, where: str = MANIFEST_NAME) -> Manifest:
        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors(include_url=False, include_input=False)[0]
            loc = ".".join(str(p) for p in err["loc"]) or "manifest"
            raise ManifestInvalid(f"{where}: {loc}: {_one_line(err['msg'])}") from None


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def is_safe_name(name: str) -> bool:
    return bool(NAME_RE.fullmatch(name)) and name != MANIFEST_NAME and len(name) <= 255


def check_digest(digest: str) -> str:
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise SetDigestInvalid(f"{str(digest)[:80]!r} is not a set digest (64 lowercase hex)")
    return digest


def hash_bytes(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def _check_json_value(value: Any, depth: int) -> None:
    if depth > _MAX_FACT_DEPTH:
        raise ValueError("facts nested too deep")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("facts hold a non-finite number")
    if isinstance(value, list):
        for item in value:
            _check_json_value(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("facts keys are text")
            _check_json_value(item, depth + 1)
    elif not (value is None or isinstance(value, bool | int | float | str)):
        raise ValueError(f"facts hold a {type(value).__name__}, not a JSON value")


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:200]


# --- writing a manifest ---------------------------------------------------------------------


def write_manifest(
    directory: str | os.PathLike[str],
    *,
    name: str,
    capability: str,
    version: str,
    facts: Mapping[str, Any],
    usage: str = "wai-usage.json",
) -> Manifest:
    """Hash every file under ``directory`` (set.json aside) and write set.json there, atomically
    and in canonical form, so the same files always give the same bytes and digest."""
    root = Path(directory)
    files: dict[str, dict[str, Any]] = {}
    for rel in _walk(root):
        digest, size = hash_file(root / rel)
        files[rel] = {"blake3": digest, "size": size}
    manifest = Manifest.validated(
        {
            "format": SET_FORMAT,
            "name": name,
            "capability": capability,
            "version": version,
            "facts": dict(facts),
            "files": files,
            "usage": usage,
        },
        where=str(root / MANIFEST_NAME),
    )
    atomic_write(root / MANIFEST_NAME, manifest.canonical())
    return manifest


def _walk(root: Path) -> list[str]:
    """Every regular file under ``root`` by its set name; links and special files refused."""
    out: list[str] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if rel == MANIFEST_NAME:
                    continue
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    raise SetUnsafeEntry(f"{rel!r}: a link or special file cannot be in a set")
                if stat.S_ISDIR(mode):
                    stack.append(rel)
                    continue
                if not is_safe_name(rel):
                    raise SetFileUnexpected(f"{rel!r}: not an allowed file name in a set")
                out.append(rel)
    return sorted(out)


def hash_file(path: Path, *, limit: int | None = None) -> tuple[str, int]:
    """BLAKE3 and size of a regular file, read without following a link."""
    hasher = blake3.blake3()
    size = 0
    with _open_regular(path) as fh:
        while chunk := fh.read(_CHUNK):
            size += len(chunk)
            if limit is not None and size > limit:
                raise SetTooLarge(f"{path.name}: over the limit of {limit} bytes")
            hasher.update(chunk)
    return hasher.hexdigest(), size


def _open_regular(path: Path) -> Any:
    # O_NOFOLLOW: a link swapped in for a file is refused, never followed.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SetUnsafeEntry(f"{path.name}: not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write a uniquely named temporary file beside ``path`` and rename it into place; a failed
    write removes the temporary file and leaves ``path`` as it was."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- a set opened for a decode ---------------------------------------------------------------


class LoadedSet:
    """A set whose every file was read once and checked against its manifest (and the pin).

    :meth:`read` returns exactly those bytes: nothing is read from disk between the check and
    the use, so a file changed after :func:`load` changes nothing (§6.1: the bytes a pin
    verified are the bytes the decode reads).
    """

    __slots__ = ("_files", "digest", "manifest")

    def __init__(self, manifest: Manifest, files: Mapping[str, bytes]) -> None:
        self.manifest = manifest
        self.digest = manifest.digest
        self._files = dict(files)

    @property
    def capability(self) -> str:
        return self.manifest.capability

    @property
    def facts(self) -> Mapping[str, Any]:
        return types.MappingProxyType(self.manifest.facts)

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
    manifest_bytes = _read_exact(directory / MANIFEST_NAME, max_manifest_bytes, MANIFEST_NAME)
    if manifest_bytes is None:
        raise SetFileMissing(f"set {digest[:16]}…: {MANIFEST_NAME} is missing")
    manifest = Manifest.from_bytes(manifest_bytes)
    if manifest.digest != digest:
        raise SetFileMismatch(f"set {digest[:16]}…: {MANIFEST_NAME} does not hash to the digest")
    if pin is not None:  # §2: a pin names one capability's set by its digest
        if pin.digest != manifest.digest:
            raise PinMismatch(
                f"the pin over {pin.capability} names set {pin.digest[:16]}…, "
                f"not {manifest.digest[:16]}…"
            )
        if pin.capability != manifest.capability:
            raise PinMismatch(
                f"the pin is over {pin.capability}; set {digest[:16]}… is {manifest.capability}'s"
            )
    if max_total_bytes is not None and manifest.total_size > max_total_bytes:
        raise SetTooLarge(f"set {digest[:16]}…: {manifest.total_size} bytes over the limit")
    files: dict[str, bytes] = {}
    for name, entry in sorted(manifest.files.items()):
        data = _read_exact(directory / name, entry.size, name)
        if data is None:
            raise SetFileMissing(f"set {digest[:16]}…: {name} is missing")
        if len(data) != entry.size or hash_bytes(data) != entry.blake3:
            raise SetFileMismatch(f"set {digest[:16]}…: {name} differs from its manifest entry")
        files[name] = data
    return LoadedSet(manifest, files)


def _read_exact(path: Path, expected: int, name: str) -> bytes | None:
    """The file's bytes, reading at most one byte past ``expected`` (so an oversize file is
    seen without reading it all); ``None`` when it does not exist."""
    try:
        fh = _open_regular(path)
    except FileNotFoundError:
        return None
    except SetUnsafeEntry:
        raise
    except OSError as exc:  # ELOOP from O_NOFOLLOW: a link where a file should be
        raise SetUnsafeEntry(f"{name}: cannot be read as a regular file ({exc.strerror})") from None
    with fh:
        return bytes(fh.read(expected + 1))


# --- the store -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetLimits:
    """What installing or opening one set may read: per file, in all, and in an archive."""

    max_file_bytes: int = 1 << 30
    max_total_bytes: int = 4 << 30
    max_files: int = 1024
    max_archive_members: int = 4096
    max_manifest_bytes: int = 1 << 20


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
            "problems": [
                {"file": p.name, "code": p.code, "message": p.message} for p in self.problems
            ],
        }


_DEFAULTS = "defaults.json"
_DEFAULT_LIMITS: Final = SetLimits()


class SetStore:
    """Sets on this machine, one folder each, named by digest: ``<root>/<digest>/``.

    ``root`` is ``<data_dir>/sets`` (:func:`codec.config.sets_dir`). Installs stage into a
    dot-folder under ``root`` and rename into place, so a set is either wholly there or absent.
    """

    def __init__(self, root: str | os.PathLike[str], *, limits: SetLimits = _DEFAULT_LIMITS):
        self.root = Path(root)
        self.limits = limits

    def __repr__(self) -> str:
        return f"SetStore({str(self.root)!r})"

    # -- installing

    def install(self, source: str | os.PathLike[str]) -> InstalledSet:
        """Install from a set folder or a .tar/.tar.gz/.zip archive of one; every file checked
        against the manifest first. Installing an installed set returns it unchanged."""
        from wai_dispatch.codec.store import stage  # codec.store imports this module

        source = Path(source)
        if source.is_dir():  # cheap when already installed: the manifest alone gives the digest
            data = _read_exact(
                source / MANIFEST_NAME, self.limits.max_manifest_bytes, MANIFEST_NAME
            )
            if data is not None and len(data) <= self.limits.max_manifest_bytes:
                digest = Manifest.from_bytes(data, where=str(source / MANIFEST_NAME)).digest
                if self._present(digest):
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
            if self._present(manifest.digest):
                return self.get(manifest.digest)
            try:
                os.rename(staged.directory, target)
            except OSError:
                if not self._present(manifest.digest):  # not a concurrent install of the same
                    raise
            _fsync_dir(self.root)
            return self.get(manifest.digest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- reading

    def list(self) -> list[InstalledSet]:
        """Every installed set whose manifest reads, by name then digest. A folder whose
        set.json does not read is left out; :meth:`verify` says what is wrong with it."""
        out = []
        for digest in self._digests():
            try:
                out.append(self.get(digest))
            except SetError:
                continue
        return sorted(out, key=lambda s: (s.name, s.digest))

    def get(self, digest: str) -> InstalledSet:
        path = self.root / check_digest(digest)
        data = _read_exact(path / MANIFEST_NAME, self.limits.max_manifest_bytes, MANIFEST_NAME)
        if data is None:
            raise SetNotInstalled(f"set {digest[:16]}… is not installed in {self.root}")
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
        if not (path / MANIFEST_NAME).exists():
            raise SetNotInstalled(f"set {digest[:16]}… is not installed in {self.root}")
        return load(
            path,
            digest,
            pin=pin,
            max_manifest_bytes=self.limits.max_manifest_bytes,
            max_total_bytes=self.limits.max_total_bytes,
        )

    def verify(self, digest: str) -> Verification:
        """Re-hash every file; every difference is reported, by file."""
        path = self.root / check_digest(digest)
        if not path.is_dir():
            raise SetNotInstalled(f"set {digest[:16]}… is not installed in {self.root}")
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
            except (OSError, SetError) as exc:
                problem(name, SetUnsafeEntry, f"{name}: {_one_line(exc)}")
                continue
            if size != entry.size or got != entry.blake3:
                problem(name, SetFileMismatch, f"{name} differs from its manifest entry")
        try:
            extra = set(_walk(path)) - set(manifest.files)
        except SetError as exc:
            problem("?", type(exc), exc.message)
            extra = set()
        for name in sorted(extra):
            problem(name, SetFileUnexpected, f"{name} is not in the manifest")
        return Verification(digest, tuple(problems))

    # -- removing and defaults

    def remove(self, digest: str) -> None:
        """Take the set out of the store (renamed aside first, so it vanishes at once)."""
        path = self.root / check_digest(digest)
        if not path.is_dir():
            raise SetNotInstalled(f"set {digest[:16]}… is not installed in {self.root}")
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
            raise SetNotInstalled(f"no set of {capability} is installed in {self.root}")
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
            raise SetError(
                f"set {digest[:16]}… is {chosen.capability}'s, not {capability}'s",
                code="set_capability_mismatch",
            )
        self._write_defaults({**self._defaults(), capability: digest})
        return chosen

    def defaults(self) -> dict[str, str]:
        """The defaults chosen with :meth:`set_default`, by capability."""
        return dict(self._defaults())

    # -- internals

    def _sweep(self, max_age_s: float = 3600.0) -> None:
        # An install or removal killed midway (power loss, SIGKILL) leaves its dot-folder;
        # one untouched for an hour is no live operation's.
        cutoff = time.time() - max_age_s
        for prefix in (".install-", ".remove-"):
            for leftover in self.root.glob(prefix + "*"):
                try:
                    if leftover.lstat().st_mtime < cutoff:
                        shutil.rmtree(leftover, ignore_errors=True)
                except OSError:
                    continue

    def _present(self, digest: str) -> bool:
        return (self.root / digest / MANIFEST_NAME).is_file()

    def _digests(self) -> builtins.list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if DIGEST_RE.fullmatch(p.name))

    def _defaults(self) -> dict[str, str]:
        path = self.root / _DEFAULTS
        try:
            obj = json.loads(path.read_bytes())
        except (OSError, ValueError):
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


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def bundled_dir() -> Path:
    """Where the project's bundled sets live: ``conformance/sets/<name>/``."""
    from wai_dispatch import conformance  # lazy: the corpus package is data

    return Path(conformance.__file__).resolve().parent / "sets"


def ensure_bundled(store: SetStore, directory: Path | None = None) -> list[InstalledSet]:
    """Install every bundled set the store lacks (cheap when all are there: one manifest read
    and hash each); the bundled sets, installed. A bundled set becomes its capability's
    default when none is chosen yet, so an envelope that names no set decodes on a fresh
    install even after an operator adds sets of their own (docs/sets.md)."""
    root = bundled_dir() if directory is None else directory
    if not root.is_dir():
        return []
    out = []
    for candidate in sorted(p for p in root.iterdir() if (p / MANIFEST_NAME).is_file()):
        installed = store.install(candidate)
        if installed.capability not in store.defaults():
            store.set_default(installed.capability, installed.digest)
        out.append(installed)
    return out
