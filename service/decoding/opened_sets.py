"""A decoder's opened sets: each installed set read from the store once (every byte verified,
its programs and tables checked, a hyperprior's hyper-synthesis bound-checked) and kept by
digest in an LRU, reopened when its files change on disk; and installing into the store, which
refuses a set whose programs do not load or whose capability the decoder's registry does not
hold (``unknown_capability``: no path here could decode it, and it must not become a default)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from wai_dispatch.codec.entropy import tables_of
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.sets import InstalledSet, SetStore
from wai_dispatch.codec.sets.loaded import check_pin
from wai_dispatch.dispatch import Pin
from wai_dispatch.dispatch.errors import UnknownCapability, WaiError
from wai_dispatch.dispatch.registry import Registry
from wai_dispatch.paths.lru import LRU
from wai_dispatch.paths.programs import check_programs
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.decoding.parts import OpenedSet, check_capability

__all__ = ["OpenedSets"]


class OpenedSets:
    """The sets of ``store`` a decoder has opened, kept in ``kept`` (each counted as its files'
    bytes); thread-safe: one thread hashes a set, the others wait for it and reuse it, while
    other sets open beside it (a replica warming its sets opens them at once)."""

    def __init__(self, store: SetStore, kept: LRU[str, OpenedSet], registry: Registry) -> None:
        self.store = store
        self.kept = kept
        self.registry = registry
        self._guard = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}  # one per digest: sets open at once
        #: Called before a set missing from the store is answered not installed: raises when
        #: its absence cannot be confirmed (service/store/setsync.py; none: nothing to ask).
        self.confirm_missing: Callable[[], None] = lambda: None

    def get(self, digest: str, pin: Pin | None) -> OpenedSet:
        """The set ``digest``, from the kept ones, else opened from the store (when absent or
        changed on disk); held to ``pin`` (§2: a pinned decode uses exactly these bytes)."""
        opened = self.kept.get(digest)
        if opened is None or not opened.files.unchanged():
            with self._guard:
                opening = self._opening.setdefault(digest, threading.Lock())
            with opening:
                opened = self.kept.get(digest)
                if opened is None or not opened.files.unchanged():
                    files = self.store.open(digest)  # every byte read once and verified
                    check_programs(files)  # a broken program is refused as the set loads
                    try:  # parsed once here; a decode that needs bad tables says why
                        tables = tables_of(files)
                    except CodecError:
                        tables = None
                    # a hyperprior set's program is bound-checked here, as the set loads
                    opened = OpenedSet(files, tables, HyperStage.of(files))
                    nbytes = sum(len(data) for data in files.files.values())
                    self.kept.put(digest, opened, nbytes)
        check_pin(opened.files.manifest, pin)
        return opened

    def for_part(self, given: str | None, capability: str, pin: Pin | None) -> OpenedSet:
        """A part's set: the one it names, else the store's default for its capability; its
        capability checked against the part's."""
        digest = given or self.store.default_for(capability).digest
        opened = self.get(digest, pin)
        check_capability(digest, opened, capability)
        return opened

    def install(self, source: str | os.PathLike[str]) -> InstalledSet:
        """Install a set (folder or archive) into the store, refusing one whose capability
        the registry does not hold or whose programs do not load (e.g. a ``wai-ops/1`` program
        that breaks the bound rule): nothing stays."""
        existed = {entry.digest for entry in self.store.list()}
        entry = self.store.install(source)
        try:
            if entry.capability not in self.registry:
                known = ", ".join(sorted(self.registry))
                raise UnknownCapability(
                    f"set {entry.name} ({entry.digest[:16]}…) is of capability "
                    f"{entry.capability!r}, which this build does not know (known: {known}); "
                    "no path here could decode it"
                )
            files = self.store.open(entry.digest)
            check_programs(files)
            HyperStage.of(files)  # a hyperprior set's hyper-synthesis: the bound rule too
        except WaiError:
            if entry.digest not in existed:
                self.store.remove(entry.digest)
            raise
        self.forget(entry.digest)
        return entry

    def forget(self, digest: str | None = None) -> None:
        """Drop a kept set (every kept set without ``digest``): the next use re-verifies it."""
        if digest is None:
            self.kept.clear()
        else:
            self.kept.pop(digest)
