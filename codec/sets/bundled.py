"""Bundled sets: installed into the store on first use, each its capability's default when none
is chosen yet (docs/sets.md). Where they live is the caller's to say (the service passes
``wai_dispatch.conformance``'s folder); nothing in ``codec`` knows the corpus."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wai_dispatch.codec.sets.errors import SetError
from wai_dispatch.codec.sets.manifest import MANIFEST_NAME
from wai_dispatch.codec.sets.store import InstalledSet, Problem, SetStore


@dataclass(frozen=True)
class BundledResult:
    """The bundled sets installed, and those that could not be, by folder name, with why."""

    installed: list[InstalledSet] = field(default_factory=list)
    problems: dict[str, Problem] = field(default_factory=dict)


def install_bundled(store: SetStore, directory: Path | None) -> BundledResult:
    """Install every bundled set the store lacks, and repair one whose copy in the store is
    damaged (cheap when all are there: a manifest read and a ``stat`` per file). A bundled set
    that cannot be installed is reported, never raised: one damaged set does not stop the
    commands that need the others."""
    out = BundledResult()
    if directory is None or not directory.is_dir():
        return out
    for candidate in sorted(p for p in directory.iterdir() if (p / MANIFEST_NAME).is_file()):
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


def ensure_bundled(store: SetStore, directory: Path | None) -> list[InstalledSet]:
    """:func:`install_bundled`'s installed sets (the problems left out)."""
    return install_bundled(store, directory).installed
