"""Bundled sets: installed into the store on first use, each its capability's default when none
is chosen yet (docs/sets.md). Where they live is the caller's to say (the service passes
``wai_dispatch.conformance``'s folder); nothing in ``codec`` knows the corpus."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wai_dispatch.codec.sets.errors import SetError
from wai_dispatch.codec.sets.manifest import MANIFEST_NAME, Manifest
from wai_dispatch.codec.sets.store import InstalledSet, Problem, SetStore


@dataclass(frozen=True)
class BundledResult:
    """The bundled sets installed, and those that could not be, by folder name, with why."""

    installed: list[InstalledSet] = field(default_factory=list)
    problems: dict[str, Problem] = field(default_factory=dict)


def bundled_folders(directory: Path | None) -> list[Path]:
    """The bundled set folders, by name."""
    if directory is None or not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if (p / MANIFEST_NAME).is_file())


def bundled_digest(folder: Path) -> str | None:
    """A bundled set folder's digest (its manifest's), ``None`` when it does not read."""
    try:
        return Manifest.from_bytes((folder / MANIFEST_NAME).read_bytes(), where=folder.name).digest
    except (OSError, SetError):
        return None


def install_bundled(
    store: SetStore, directory: Path | None, *, skip: frozenset[str] = frozenset()
) -> BundledResult:
    """Install every bundled set the store lacks but those whose digest is in ``skip`` (the
    set registry removed them: a removed bundled set stays removed), and repair one whose copy
    in the store is damaged (cheap when all are there: a manifest read and a ``stat`` per
    file); each its capability's default when none is chosen. A bundled set that cannot be
    installed is reported, never raised: one damaged set does not stop the commands that need
    the others."""
    out = BundledResult()
    for candidate in bundled_folders(directory):
        if skip and bundled_digest(candidate) in skip:
            continue
        try:
            installed = store.install(candidate, check=False)
            if installed.capability not in store.defaults():
                store.set_default(installed.capability, installed.digest)
        except SetError as exc:
            out.problems[candidate.name] = Problem(MANIFEST_NAME, exc.code, exc.message)
            continue
        except OSError as exc:
            out.problems[candidate.name] = Problem(
                MANIFEST_NAME, "set_invalid", f"{candidate.name}: {exc.strerror or exc}"
            )
            continue
        out.installed.append(installed)
    return out
