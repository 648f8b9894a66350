"""The recorder: where each decode's report records go. Straight into the report store while it
answers and nothing is spooled, else into the durable spool (:mod:`service.store.spool`), which
the recorder's thread replays into the store when it is back (and, beside it, the orphaned
spools of other replicas on the volume: :mod:`service.store.spool_volume`). An acknowledged
report is never lost."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.spool import Spool, SpoolFull, SpoolWriteFailed

__all__ = ["Recorder"]

log = logging.getLogger("wai_dispatch.spool")


class Recorder:
    """Stores each decode's records: straight into the store while it answers and nothing is
    spooled, else into the spool, which a thread replays when the store is back. When the
    spool cannot take a line (full, or its disk is) the store is tried once more, so a decode
    is never refused once the store is back, even while the spool still drains.

    ``migrate``, when given, is run by the thread before its first replay, until it succeeds:
    a service started while its store was down migrates it when it returns. ``adopt``, when
    given (:meth:`SpoolVolume.adopt <service.store.spool_volume.SpoolVolume.adopt>`), is run
    with the store's batch insert every ``adopt_every_s`` while the store answers: the
    orphaned spools of other replicas on the volume are replayed too."""

    def __init__(
        self,
        store: ReportStore,
        spool: Spool,
        *,
        retry_s: float = 0.5,
        migrate: Callable[[], None] | None = None,
        adopt: Callable[[Callable[[list[dict[str, Any]]], int]], int] | None = None,
        adopt_every_s: float = 2.0,
    ) -> None:
        self.store = store
        self.spool = spool
        self.retry_s = retry_s
        self._migrate = migrate
        self._adopt = adopt
        self.adopt_every_s = adopt_every_s
        self._adopt_at = 0.0
        self.store_up = migrate is None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-replay", daemon=True)
        if spool.size() or migrate is not None:
            self.store_up = False
            self._wake.set()
        self._thread.start()

    @property
    def migrated(self) -> bool:
        return self._migrate is None

    def record(self, records: list[ReportRecord]) -> None:
        if self.store_up and not self.spool.size():
            try:
                self.store.insert(records)
                return
            except StoreDown as exc:
                log.warning("report store down, spooling: %s", exc)
                self.store_up = False
        try:
            self.spool.append([r.to_json() for r in records])
        except (SpoolFull, SpoolWriteFailed) as exc:
            # The spool cannot take it: straight into the store if it answers (it is back
            # and the spool drains), else the decode is refused.
            try:
                self.store.insert(records)
            except StoreDown:
                raise exc from None
            self.store_up = True
            return
        self._wake.set()

    def _insert_batch(self, batch: list[dict[str, Any]]) -> int:
        n = self.store.insert([ReportRecord.from_json(obj) for obj in batch])
        self.store_up = True  # the store answers: new records may go straight in
        return n

    def pending_bytes(self) -> int:
        return self.spool.size()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.retry_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._migrate is not None:
                try:
                    self._migrate()
                except StoreDown:
                    continue
                log.info("report store migrated")
                self._migrate = None
            if not self.spool.size():
                self.store_up = self.store_up or self.store.ping()
            else:
                try:
                    n = self.spool.replay(self._insert_batch)
                except StoreDown:
                    self.store_up = False
                    continue
                if n:
                    log.info("spool: replayed %d report(s) into the store", n)
                if not self.spool.size():
                    self.store_up = True
            if self.store_up and self._adopt is not None and time.monotonic() >= self._adopt_at:
                self._adopt_at = time.monotonic() + self.adopt_every_s
                try:
                    self._adopt(self._insert_batch)
                except StoreDown:
                    self.store_up = False

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self.spool.close()
