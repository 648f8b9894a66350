"""``set.json`` (``wai-set/1``): the manifest, its digest (the set's), the names a set may hold,
and the writer that hashes a folder into a manifest (docs/sets.md)."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import blake3
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from wai_dispatch.codec.sets.errors import (
    ManifestInvalid,
    SetDigestInvalid,
    SetFileUnexpected,
    SetUnsafeEntry,
    one_line,
)
from wai_dispatch.codec.sets.regular import NotRegularFile, atomic_write, open_regular
from wai_dispatch.dispatch import strictjson
from wai_dispatch.setfacts.facts import SetFacts

SET_FORMAT: Final = "wai-set/1"
MANIFEST_NAME: Final = "set.json"
DIGEST_RE: Final = re.compile(r"[0-9a-f]{64}")
# A file name in a set: relative, '/'-separated, each segment of letters, digits, '.', '_',
# '-' and not starting with '.', so no '..', no hidden files, nothing a filesystem reads twice.
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
NAME_RE: Final = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT}){{0,7}}")
_CHUNK: Final = 1 << 20

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
    facts: SetFacts = Field(default_factory=SetFacts)
    files: dict[str, FileEntry]
    usage: StrictStr = "wai-usage.json"
    _digest: str | None = PrivateAttr(default=None)

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
        doc = self.model_dump(mode="json", exclude={"facts"})
        doc["facts"] = self.facts.to_json()
        return canonical_json(doc)

    @property
    def digest(self) -> str:
        # Frozen: computed once per manifest (a decode asks for it several times).
        if self._digest is None:
            self._digest = blake3.blake3(self.canonical()).hexdigest()
        return self._digest

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files.values())

    @classmethod
    def from_bytes(cls, data: bytes, *, where: str = MANIFEST_NAME) -> Manifest:
        try:
            obj = strictjson.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ManifestInvalid(f"{where}: not JSON: {one_line(exc)}") from None
        if not isinstance(obj, dict):
            raise ManifestInvalid(f"{where}: not a JSON object")
        if obj.get("format") != SET_FORMAT:
            raise ManifestInvalid(f"{where}: format is not {SET_FORMAT!r}")
        return cls.validated(obj, where=where)

    @classmethod
    def validated(cls, obj: Mapping[str, Any], *, where: str = MANIFEST_NAME) -> Manifest:
        try:
            return cls.model_validate(obj)
        except (ValidationError, RecursionError) as exc:
            if isinstance(exc, RecursionError):
                raise ManifestInvalid(f"{where}: nested too deep") from None
            err = exc.errors(include_url=False, include_input=False)[0]
            loc = ".".join(str(p) for p in err["loc"]) or "manifest"
            raise ManifestInvalid(f"{where}: {loc}: {one_line(err['msg'])}") from None


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


def hash_file(path: Path) -> tuple[str, int]:
    """BLAKE3 and size of a regular file, read without following a link (a FIFO or a device
    is :class:`codec.files.NotRegularFile`, never opened)."""
    hasher = blake3.blake3()
    size = 0
    with open_regular(path) as fh:
        while chunk := fh.read(_CHUNK):
            size += len(chunk)
            hasher.update(chunk)
    return hasher.hexdigest(), size


def walk(root: Path, *, strict: bool = True) -> list[str]:
    """Every regular file under ``root`` by its set name (set.json aside). With ``strict``, a
    link or special file raises :class:`SetUnsafeEntry`; without, it is listed like a file
    (the store's check then reports it as tampering, by name)."""
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
                if stat.S_ISDIR(mode):
                    stack.append(rel)
                    continue
                if not stat.S_ISREG(mode):
                    if strict:
                        raise SetUnsafeEntry(f"{rel!r}: a link or special file cannot be in a set")
                    out.append(rel)
                    continue
                if strict and not is_safe_name(rel):
                    raise SetFileUnexpected(f"{rel!r}: not an allowed file name in a set")
                out.append(rel)
    return sorted(out)


def write_manifest(
    directory: str | os.PathLike[str],
    *,
    name: str,
    capability: str,
    version: str,
    facts: Mapping[str, Any] | SetFacts,
    usage: str = "wai-usage.json",
) -> Manifest:
    """Hash every file under ``directory`` (set.json aside) and write set.json there, atomically
    and in canonical form, so the same files always give the same bytes and digest."""
    root = Path(directory)
    files: dict[str, dict[str, Any]] = {}
    for rel in walk(root):
        try:
            digest, size = hash_file(root / rel)
        except NotRegularFile as exc:
            raise SetUnsafeEntry(f"{rel!r}: {exc.strerror}") from None
        files[rel] = {"blake3": digest, "size": size}
    manifest = Manifest.validated(
        {
            "format": SET_FORMAT,
            "name": name,
            "capability": capability,
            "version": version,
            "facts": facts.to_json() if isinstance(facts, SetFacts) else dict(facts),
            "files": files,
            "usage": usage,
        },
        where=str(root / MANIFEST_NAME),
    )
    atomic_write(root / MANIFEST_NAME, manifest.canonical())
    return manifest
