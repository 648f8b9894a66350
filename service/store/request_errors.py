"""Request errors as telemetry: every request the service answers with a 4xx (its code, status,
the sink when a sink's token was checked, request id, method, path, time) is noted by
:class:`ErrorLog` and written to ``request_errors`` by a thread of its own, so the dashboard
can show them by code and by sink.

Best-effort by design: noting one never waits on the store, never fails the request nor changes
its answer. The queue is bounded; when it is full (a burst, or the store down for long), or a
write fails, those notes are dropped and counted (:attr:`ErrorLog.dropped`; ``/metrics``'
``wai_request_errors_total`` counts every error regardless). Retention prunes them with the
reports (service/store/retention.py)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import SQLAlchemyError

from wai_dispatch.service.store.models import RequestErrorRow
from wai_dispatch.service.store.report_store import ReportStore

__all__ = ["ErrorLog", "ErrorNote", "errors_by_sink", "list_errors", "prune_errors"]

log = logging.getLogger("wai_dispatch.service.request_errors")
E = RequestErrorRow.__table__.c


@dataclass(frozen=True)
class ErrorNote:
    created_ms: int
    status: int
    code: str
    sink: str | None
    request_id: str
    method: str
    path: str


class ErrorLog:
    """The writer: :meth:`note` queues (never blocks), a daemon thread inserts in batches."""

    def __init__(self, store: ReportStore, *, capacity: int = 10_000, batch: int = 500) -> None:
        self.store = store
        self.batch = batch
        self.written = 0
        self.dropped = 0
        self._queue: queue.Queue[ErrorNote | None] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="request-errors", daemon=True)
        self._thread.start()

    def note(
        self, status: int, code: str, *, sink: str | None, request_id: str, method: str,
        path: str,
    ) -> None:  # fmt: skip
        """Queue one error (a 4xx answer); dropped, and counted, when the queue is full."""
        item = ErrorNote(int(time.time() * 1000), status, str(code)[:64],
                         None if sink is None else sink[:128], request_id[:36], method[:16],
                         path[:256])  # fmt: skip
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every note queued so far was written or dropped (tests, shutdown)."""
        end = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._queue.task_done()
                return
            items = [first]
            while len(items) < self.batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._write(items)
                    self._queue.task_done()
                    return
                items.append(more)
            self._write(items)

    def _write(self, items: list[ErrorNote]) -> None:
        try:
            with self.store.engine.begin() as conn:
                conn.execute(insert(RequestErrorRow), [asdict(i) for i in items])
            self.written += len(items)
        except SQLAlchemyError as exc:  # best-effort: the store is down or refused them
            self.dropped += len(items)
            log.warning("request errors not stored (%d dropped): %s", len(items),
                        str(exc).splitlines()[0])  # fmt: skip
        finally:
            for _ in items:
                self._queue.task_done()

    def close(self) -> None:
        try:
            self._queue.put(None, timeout=1)
        except queue.Full:
            return
        self._thread.join(timeout=5)


def _where(since_ms: int | None, until_ms: int | None, sinks: tuple[str, ...] | None,
           code: str | None) -> list[Any]:  # fmt: skip
    out: list[Any] = []
    if since_ms is not None:
        out.append(E.created_ms >= since_ms)
    if until_ms is not None:
        out.append(E.created_ms < until_ms)
    if sinks is not None:
        out.append(E.sink.in_(sinks))
    if code is not None:
        out.append(E.code == code)
    return out


def list_errors(
    store: ReportStore,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    sinks: tuple[str, ...] | None = None,
    code: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> dict[str, Any]:
    """The errors of a window: their ``total``, counts ``by_code`` (with the status) and
    ``by_sink`` (``null``: no sink's token), and a page of them, newest first."""
    where = _where(since_ms, until_ms, sinks, code)
    n = func.count().label("n")
    with store.engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(E.seq.table)
                                 .where(*where)).scalar_one())  # fmt: skip
        by_code = conn.execute(
            select(E.code, E.status, n).where(*where).group_by(E.code, E.status)
        ).all()
        by_sink = conn.execute(select(E.sink, n).where(*where).group_by(E.sink)).all()
        rows = conn.execute(
            select(E.created_ms, E.status, E.code, E.sink, E.request_id, E.method, E.path)
            .where(*where).order_by(E.created_ms.desc(), E.seq.desc())
            .limit(limit).offset(offset)
        ).mappings().all()  # fmt: skip
    return {
        "total": total,
        "by_code": sorted(
            ({"code": c, "status": s, "count": int(k)} for c, s, k in by_code),
            key=lambda r: (-r["count"], r["code"], r["status"]),
        ),
        "by_sink": sorted(
            ({"sink": s, "count": int(k)} for s, k in by_sink),
            key=lambda r: (-r["count"], r["sink"] or ""),
        ),
        "items": [
            {"time_ms": r["created_ms"], **{k: v for k, v in r.items() if k != "created_ms"}}
            for r in rows
        ],
        "limit": limit,
        "offset": offset,
    }


def errors_by_sink(
    conn: Any, since_ms: int | None, until_ms: int | None
) -> dict[str, tuple[int, int]]:
    """Per sink: its errors in the window and the time of its latest."""
    rows = conn.execute(
        select(E.sink, func.count(), func.max(E.created_ms))
        .where(E.sink.is_not(None), *_where(since_ms, until_ms, None, None))
        .group_by(E.sink)
    ).all()  # fmt: skip
    return {s: (int(n), int(last)) for s, n, last in rows}


def prune_errors(store: ReportStore, before_ms: int) -> int:
    """Delete the errors noted before ``before_ms``; returns how many went."""
    with store.engine.begin() as conn:
        gone = conn.execute(delete(RequestErrorRow).where(E.created_ms < before_ms))
    return int(gone.rowcount or 0)
