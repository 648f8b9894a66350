"""The data directory's set store as a cache of the set registry (docs/sets.md): the sets the
registry removed, as this replica last read them (``<data_dir>/sets/removed.json``, written by
the service's sync in :mod:`service.store.setsync`), and the bundled sets installed into the
cache unless removed. No database here: the registry is :mod:`service.store.setregistry`'s."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from wai_dispatch.codec.sets import (
    canonical_json,
)
from wai_dispatch.codec.sets.manifest import DIGEST_RE
from wai_dispatch.codec.sets.regular import atomic_write
from wai_dispatch.dispatch import strictjson

#: The removed sets' digests, a JSON list, in the store's root.
REMOVED = "removed.json"


def removed(root: Path) -> frozenset[str]:
    """The digests the registry had removed when this replica last read it."""
    try:
        data = (root / REMOVED).read_bytes()
    except OSError:
        return frozenset()
    try:
        obj = strictjson.loads(data)
    except ValueError:
        return frozenset()
    if not isinstance(obj, list):
        return frozenset()
    return frozenset(d for d in obj if isinstance(d, str) and DIGEST_RE.fullmatch(d))


def write_removed(root: Path, digests: Iterable[str]) -> None:
    """Record the registry's removed sets (written only when they changed)."""
    wanted = sorted(set(digests))
    if wanted == sorted(removed(root)) and (root / REMOVED).exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    atomic_write(root / REMOVED, canonical_json(wanted))
