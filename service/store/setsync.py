"""A replica's local set store kept as a cache of the set registry (docs/sets.md).

:meth:`SetSync.sync` reads the registry (one small query) and makes the cache match it: a set
the registry lists that the cache lacks is fetched by digest, installed into the cache with
every file checked against its manifest, and used only when the installed digest is the one
the registry names; a removed set leaves the cache and the decoder's opened sets; each
capability's default is the registry's. The service runs it every ``sets_refresh_s`` seconds on
a thread (:meth:`start`), so every replica sees an install or a removal made anywhere within
``sets_refresh_s`` plus one sync (a removal: one query; an install: the set's fetch too), and
the set routes sync first when the view is older than that (:meth:`fresh`).

:meth:`bootstrap` runs once at start: sets in the cache the registry has never known are put
into it (a data directory from before the registry), and, when the ``bundled_sets`` setting is
on, the bundled sets too, unless the registry removed them (their tombstone stays).

Every change to the cache (a sync, an install, a removal, the bootstrap) holds the cache's lock:
a thread lock within the process and an exclusive ``flock`` on ``.sync.lock`` in the cache's
folder across processes, since the processes of ``serve --workers N`` share one data directory.
Without it one process's sync drops a set another has just put into the cache and not yet
published to the registry."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from wai_dispatch.codec.sets import (
    MANIFEST_NAME,
    Problem,
    SetError,
    SetNotInstalled,
    SetStore,
    bundled_digest,
    bundled_folders,
    canonical_json,
)
from wai_dispatch.codec.sets.regular import atomic_write
from wai_dispatch.conformance import sets_dir
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.setcache import removed, write_removed
from wai_dispatch.service.store.errors import SetRegistryDown, StoreError
from wai_dispatch.service.store.report_store import StoreDown
from wai_dispatch.service.store.setregistry import RegistryEntry, SetRegistry

log = logging.getLogger("wai_dispatch.service.sets")

#: The local store's file of chosen defaults (:class:`codec.sets.SetStore`'s).
_DEFAULTS = "defaults.json"
#: The file in the cache's folder whose ``flock`` every process changing the cache holds.
LOCK_NAME = ".sync.lock"
#: Sets fetched from the registry at once by one sync.
FETCHERS = 4


@dataclass
class SyncState:
    """What the last sync found: the live digests the registry listed, and the sets this
    replica could not fetch or install, each with why."""

    listed: frozenset[str] = frozenset()
    problems: dict[str, Problem] = field(default_factory=dict)
    synced: float = -float("inf")  # when (monotonic) the registry was last read
    read: bool = False  # the registry was read at least once


class SetSync:
    """Keeps ``decoder.set_store`` (the local cache) as the registry lists."""

    def __init__(
        self,
        registry: SetRegistry,
        decoder: Decoder,
        refresh_s: float = 2.0,
        *,
        bundled: Path | None = None,
        repair: bool = True,
        packaged: Path | None = None,
    ) -> None:
        self.registry = registry
        self.decoder = decoder
        self.refresh_s = refresh_s
        #: Where the bundled sets are; ``None``: they are not put into the registry.
        self.bundled = bundled
        #: Where this replica's package ships the bundled sets (a bundled set the registry
        #: lists is installed from there, whether or not :attr:`bundled` is on).
        self.packaged = packaged if packaged is not None else sets_dir()
        #: A set the registry lists whose copy here is not whole is fetched again (the
        #: service); else it is left for ``sets list`` and ``sets verify`` to show.
        self.repair = repair
        self.state = SyncState()
        self.bootstrapped = False
        #: Whether the registry answered the last sync: while it does not, a set missing from
        #: the cache may be installed there (a replica started in an outage).
        self.reachable = False
        decoder.opened.confirm_missing = self.confirm_missing
        self._tried = -float("inf")  # when (monotonic) :meth:`fresh` last tried
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def cache(self) -> SetStore:
        return self.decoder.set_store

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The cache to this thread alone: the thread lock, then the folder's ``flock``."""
        with self._lock:
            self.cache.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.cache.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing the last descriptor releases the flock

    # -- start

    def bootstrap(self) -> dict[str, Problem]:
        """Put into the registry the cache's sets it has never known, and the bundled sets
        (from :attr:`bundled`) it has never known; then :meth:`sync`. A bundled set whose
        folder does not install is reported by folder name, never raised."""
        problems: dict[str, Problem] = {}
        with self._exclusive():
            known = {e.digest for e in self.registry.entries()}
            for entry in self.cache.list():
                if entry.digest not in known and self.cache.intact(entry.digest, full=False):
                    self.registry.publish(self.cache, entry.digest)
                    self.registry.set_default(entry.capability, entry.digest, replace=False)
                    known.add(entry.digest)
            for folder in bundled_folders(self.bundled):
                digest = bundled_digest(folder)
                if digest is None or digest in known:
                    continue  # known: live (fetched below, or here) or removed (stays so)
                try:
                    entry = self.cache.install(folder, check=False)
                except (SetError, OSError) as exc:
                    message = exc.message if isinstance(exc, WaiError) else str(exc)
                    code = exc.code if isinstance(exc, WaiError) else "set_invalid"
                    problems[folder.name] = Problem(MANIFEST_NAME, code, message)
                    continue
                self.registry.publish(self.cache, entry.digest, bundled=True)
                self.registry.set_default(entry.capability, entry.digest, replace=False)
        self.sync()
        self.bootstrapped = True
        return problems

    def start(self) -> None:
        """Sync every ``refresh_s`` on a daemon thread (a registry that is down: the cache
        stays as last synced, and the start's bootstrap is retried)."""
        self._thread = threading.Thread(target=self._run, name="wai-set-sync", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                if not self.bootstrapped:
                    self.bootstrap()
                else:
                    self.sync()
            except StoreDown as exc:
                log.warning("set registry down; the cache stays as last synced: %s", exc)
            except Exception:  # the thread outlives any one bad sync
                log.exception("set registry sync failed")

    # -- keeping the cache

    def fresh(self) -> None:
        """Sync now when the last sync is older than ``refresh_s`` (a registry that is down
        leaves the cache as it is, and is asked again at most every ``refresh_s``, so an
        outage does not stall every listing)."""
        now = time.monotonic()
        if now - max(self.state.synced, self._tried) > self.refresh_s:
            self._tried = now
            try:
                if self.bootstrapped:
                    self.sync()
                else:
                    self.bootstrap()
            except StoreDown:
                return

    def sync(self) -> SyncState:
        """Make the cache what the registry lists (see the module's doc)."""
        with self._exclusive():
            asked = time.monotonic()
            try:
                entries = self.registry.entries()
                defaults = self.registry.defaults()
            except StoreDown:
                self.reachable = False
                raise
            live = {e.digest: e for e in entries if e.live}
            gone = {e.digest for e in entries if not e.live}
            here = {e.digest for e in self.cache.list()} | set(self.cache.damaged())
            for digest in sorted((gone | (here - live.keys() - gone)) & here):
                self._drop(digest)
            wanted = [
                live[digest]
                for digest in sorted(live)
                if digest not in here or (self.repair and not self.cache.intact(digest, full=False))
            ]
            problems = self._fetch_all(wanted)
            write_removed(self.cache.root, gone)
            self._write_defaults({c: d for c, d in defaults.items() if d in live})
            self.state = SyncState(frozenset(live), problems, asked, True)
            self.reachable = True
            return self.state

    def _fetch_all(self, wanted: list[RegistryEntry]) -> dict[str, Problem]:
        """Fetch and install ``wanted``, up to :data:`FETCHERS` at once (a replica starting on
        a registry of several sets waits for the slowest, not for their sum: each fetch is a
        query and an install whose hashing and program checks release the GIL in part); the
        sets that did not install, each with why. The registry down: raised, once every
        fetch started has ended."""
        problems: dict[str, Problem] = {}
        if not wanted:
            return problems
        with ThreadPoolExecutor(min(FETCHERS, len(wanted)), "wai-set-fetch") as pool:
            futures = {e.digest: pool.submit(self._fetch, e) for e in wanted}
        down: StoreDown | None = None
        for digest, future in futures.items():
            exc = future.exception()
            if exc is None:
                continue
            if isinstance(exc, StoreDown):
                down = down or exc
            elif isinstance(exc, (WaiError, OSError)):
                code = exc.code if isinstance(exc, WaiError) else "set_invalid"
                message = exc.message if isinstance(exc, WaiError) else str(exc)
                problems[digest] = Problem(MANIFEST_NAME, code, message)
                log.warning("set %s not fetched: %s: %s", digest[:16], code, message)
            else:
                raise exc
        if down is not None:
            raise down
        return problems

    def _drop(self, digest: str) -> None:
        with contextlib.suppress(SetError):  # gone already
            self.cache.remove(digest)
        self.decoder.opened.forget(digest)
        log.info("set %s removed from this replica's cache", digest[:16])

    def _fetch(self, listed: RegistryEntry) -> None:
        """Fetch the set by digest, install it into the cache (every file checked against
        the manifest, its programs loaded) and check it is the set named; else it is left out
        and the problem raised. A bundled set (registered by reference) is installed from the
        packaged copy; a replica whose package lacks it (another version) takes the registry's
        bytes if it has any (a row from before sets were registered by reference), else the
        set is ``set_not_installed`` here."""
        digest = listed.digest
        if listed.bundled:
            folder = packaged(self.packaged, digest)
            if folder is not None:
                self._check(self.decoder.opened.install(folder).digest, digest)
                log.info("set %s installed from the bundled copy", digest[:16])
                return
            try:
                data = self.registry.archive(digest)
            except SetNotInstalled:
                raise SetNotInstalled(
                    f"bundled set {listed.name} ({digest[:16]}…) is registered by reference "
                    "and this replica's package does not ship it (another wai-dispatch "
                    "version?): install it here with `sets install`, or upgrade this replica"
                ) from None
        else:
            data = self.registry.archive(digest)
        with tempfile.TemporaryDirectory(prefix="wai-fetch-") as tmp:
            archive = Path(tmp) / "set.tar"
            archive.write_bytes(data)
            entry = self.decoder.opened.install(archive)
        self._check(entry.digest, digest)
        log.info("set %s fetched from the set registry (%d bytes)", digest[:16], len(data))

    def _check(self, installed: str, digest: str) -> None:
        if installed != digest:
            self.cache.remove(installed)
            raise SetError(f"the registry's copy of {digest[:16]}… is set {installed}")

    def _write_defaults(self, defaults: dict[str, str]) -> None:
        if defaults != self.cache.defaults():
            self.cache.root.mkdir(parents=True, exist_ok=True)
            atomic_write(self.cache.root / _DEFAULTS, canonical_json(defaults))

    # -- local changes, made through the registry

    def install(self, source: Path) -> str:
        """Install a set into the cache (checked, its programs loaded) and the registry;
        its digest. The registry down: the cache keeps no set it did not have."""
        with self._exclusive():  # a sync meanwhile would drop a set the registry does not list yet
            existed = {e.digest for e in self.cache.list()}
            entry = self.decoder.opened.install(source)
            try:
                self.registry.publish(self.cache, entry.digest)
                gone = self._removed()
            except (StoreDown, WaiError) as exc:  # down, or a set the registry cannot take
                if entry.digest not in existed:
                    self.cache.remove(entry.digest)
                    self.decoder.opened.forget(entry.digest)
                if isinstance(exc, StoreDown):
                    raise registry_down(exc) from None
                raise
            write_removed(self.cache.root, gone)
            return entry.digest

    def remove(self, digest: str) -> None:
        """Write the set's tombstone in the registry, then drop it here (the other replicas
        drop it at their next sync)."""
        try:
            self.registry.remove(digest)
        except StoreDown as exc:
            raise registry_down(exc) from None
        with self._exclusive():
            if digest in {e.digest for e in self.cache.list()} | set(self.cache.damaged()):
                self._drop(digest)
            write_removed(self.cache.root, {*removed(self.cache.root), digest})

    def set_default(self, capability: str, digest: str) -> None:
        """Choose the capability's default for every replica (checked against the cache's
        copy of the set first)."""
        self.cache.set_default(capability, digest)  # set_capability_mismatch, not installed
        try:
            self.registry.set_default(capability, digest)
        except StoreDown as exc:
            raise registry_down(exc) from None

    def _removed(self) -> set[str]:
        return {e.digest for e in self.registry.entries() if not e.live}

    # -- readiness

    def confirm_missing(self) -> None:
        """Before a set missing here is answered ``set_not_installed`` (404): raise
        :class:`SetRegistryDown` (503, retryable) when the registry did not answer the last
        sync, so its absence is not known."""
        if not self.reachable:
            raise SetRegistryDown(
                "this replica cannot reach the set registry to confirm the set is not "
                "installed; retry later"
            )

    def missing(self) -> list[str]:
        """The sets the registry listed at the last sync that this replica cannot decode
        with: not in the cache, or not whole there (one ``lstat`` per file)."""
        here = {e.digest for e in self.cache.list()}
        return sorted(
            d for d in self.state.listed if d not in here or not self.cache.intact(d, full=False)
        )


def packaged(directory: Path, digest: str) -> Path | None:
    """The bundled set folder under ``directory`` whose digest is ``digest``, if any."""
    return next((f for f in bundled_folders(directory) if bundled_digest(f) == digest), None)


def registry_down(exc: StoreDown) -> StoreError:
    """``set_registry_down``: the registry's database did not answer (its words logged, not
    answered: they may name a host or a file)."""
    log.warning("set registry down: %s", exc)
    return SetRegistryDown(
        "the set registry (the report database) does not answer; nothing changed"
    )
