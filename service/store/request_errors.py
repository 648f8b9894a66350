"""Request errors as telemetry, written so no client can flood the log or blind it
(docs/dashboard.md, "Request errors"): :class:`ErrorLog` notes every 4xx answer in memory,
never waiting on the store nor changing the answer, and a thread of its own writes them: a
count per hour, sink (``""``: no sink's token), code, status and route in
``request_error_rollups`` (bounded by those keys, never by the requests), and for a sink's
errors only a row in ``request_errors``, at most ``rows_per_hour`` per sink and hour
(``request_error_samples`` counts the errors seen and the rows kept). Texts are sanitised
(:func:`clean`); a batch the store refuses while up is retried piece by piece; while it is down
the counts wait in memory, within bounds. Read by service/store/request_error_views.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from sqlalchemy import Connection, Table, insert, select, update
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from wai_dispatch.service.store import report_store
from wai_dispatch.service.store.models import (
    RequestErrorRollupRow,
    RequestErrorRow,
    RequestErrorSampleRow,
)
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.rollups import hour_of, upsert

__all__ = ["ANONYMOUS", "NO_ROUTE", "ErrorLog", "ErrorNote", "clean"]

log = logging.getLogger("wai_dispatch.service.request_errors")
ROLLUP: Table = RequestErrorRollupRow.__table__  # type: ignore[assignment]
SAMPLES: Table = RequestErrorSampleRow.__table__  # type: ignore[assignment]
#: The roll-ups' sink of an error answered to no sink's token (none, unknown, an operator's).
ANONYMOUS = ""
#: The route template of a request no route matched.
NO_ROUTE = "(no route)"
#: Rows held in memory at most while the store is down (the counts are bounded by their keys).
MAX_PENDING_ROWS = 10_000
#: Count keys held in memory at most (codes × routes × sinks an interval: never near it).
MAX_PENDING_KEYS = 100_000


def flush_wait_s() -> float:
    """How long :meth:`ErrorLog.flush` waits by default: two writes, each waiting its longest
    for the store's lock (this process's other writers, then SQLite's busy timeout)."""
    return 2 * (report_store.SQLITE_WRITERS_WAIT_S + report_store.SQLITE_BUSY_TIMEOUT_S)


def clean(text: object, limit: int) -> str:
    """``text`` as the store keeps it on every database: at most ``limit`` characters, each
    control character (NUL among them) and lone surrogate replaced by U+FFFD."""
    s = str(text)[:limit]
    if s.isprintable() and s.isascii():
        return s
    return "".join(
        "\ufffd" if (ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or 0xD800 <= ord(c) < 0xE000) else c
        for c in s
    )


@dataclass(frozen=True)
class ErrorNote:
    created_ms: int
    status: int
    code: str
    sink: str | None
    request_id: str
    method: str
    path: str
    route: str


_Key = tuple[int, str, str, int, str]  # hour_ms, sink, code, status, route


class ErrorLog:
    """The writer: :meth:`note` adds to the counts in memory (never blocks on the store), a
    daemon thread writes them as they come, at most once every ``interval_s``.

    ``counted``: errors written into the roll-ups; ``written``: rows kept; ``dropped``: a sink's
    errors not kept as rows (over the cap, found here or by the store); ``lost``: errors the
    store refused even piece by piece, or past the in-memory bounds while it was down."""

    def __init__(
        self, store: ReportStore, *, rows_per_hour: int = 100, interval_s: float = 1.0
    ) -> None:
        self.store = store
        self.rows_per_hour = rows_per_hour
        self.interval_s = interval_s
        self.counted = 0
        self.written = 0
        self.dropped = 0
        self.lost = 0
        self._lock = threading.Lock()
        self._counts: dict[_Key, list[int]] = {}  # key -> [n, last_ms]
        self._seen: dict[tuple[int, str], int] = {}  # (hour, sink) -> a sink's errors
        self._rows: list[ErrorNote] = []
        self._queued: dict[tuple[int, str], int] = {}  # (hour, sink) -> rows held for it
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._writing = threading.Lock()  # one write at a time: a flush waits for the thread's
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="request-errors", daemon=True)
        self._thread.start()

    def note(
        self,
        status: int,
        code: str,
        *,
        sink: str | None,
        request_id: str,
        method: str,
        path: str,
        route: str = NO_ROUTE,
    ) -> None:
        """Count one error (a 4xx answer); a sink's is also kept as a row, up to the cap."""
        now = int(time.time() * 1000)
        hour = hour_of(now)
        who = ANONYMOUS if sink is None else clean(sink, 128)
        key = (hour, who, clean(code, 64), int(status), clean(route, 128))
        if not self._wake.is_set():
            self._wake.set()
        with self._lock:
            slot = self._counts.get(key)
            if slot is not None:
                slot[0] += 1
                slot[1] = now
            elif len(self._counts) < MAX_PENDING_KEYS:
                self._counts[key] = [1, now]
            else:
                self.lost += 1
            if sink is None:
                return
            self._seen[(hour, who)] = self._seen.get((hour, who), 0) + 1
            held = self._queued.get((hour, who), 0)
            if held >= self.rows_per_hour or len(self._rows) >= MAX_PENDING_ROWS:
                return  # counted in ``seen``; the store counts the drop
            self._queued[(hour, who)] = held + 1
            self._rows.append(
                ErrorNote(
                    now,
                    int(status),
                    key[2],
                    who,
                    clean(request_id, 36),
                    clean(method, 16),
                    clean(path, 256),
                    key[4],
                )
            )

    @property
    def pending(self) -> int:
        """Errors counted here and not yet written."""
        with self._lock:
            return sum(n for n, _ in self._counts.values())

    def flush(self, timeout_s: float | None = None) -> bool:
        """Write what was noted so far now; ``True`` when nothing is left pending (tests,
        shutdown). ``False`` at once while the store is down or not migrated; while another
        writer holds SQLite's lock (busy), tried again until ``timeout_s``. Its default,
        :func:`flush_wait_s`, outlasts the log's own thread's write (which may wait that long
        for the store's lock) and a write of its own: a flush never gives up on a write that
        is merely queued."""
        deadline = time.monotonic() + (flush_wait_s() if timeout_s is None else timeout_s)
        while True:
            if not self._writing.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return False
            try:
                busy = self._write()
            finally:
                self._writing.release()
            if self.pending == 0:
                return True
            if not busy or time.monotonic() + 0.1 > deadline:
                return False
            time.sleep(0.1)

    def _run(self) -> None:
        while True:
            # woken by a note; while the store is down, what is held is tried again
            self._wake.wait(max(5.0, self.interval_s) if self.pending else None)
            self._wake.clear()
            with self._writing:
                try:
                    self._write()
                except Exception:
                    log.exception("request errors: writing failed")
            if self._stop:
                return
            self._stopping.wait(self.interval_s)  # the gap: what comes meanwhile waits

    def _take(self) -> tuple[dict[_Key, list[int]], dict[tuple[int, str], int], list[ErrorNote]]:
        with self._lock:
            counts, seen, rows = self._counts, self._seen, self._rows
            self._counts, self._seen, self._rows = {}, {}, []
            # the hours past are done: their in-memory row caps go
            hour = hour_of(int(time.time() * 1000))
            self._queued = {k: v for k, v in self._queued.items() if k[0] >= hour}
        return counts, seen, rows

    def _put_back(
        self,
        counts: dict[_Key, list[int]],
        seen: dict[tuple[int, str], int],
        rows: list[ErrorNote],
    ) -> None:
        """The store is down: keep what was taken for the next write, within the bounds."""
        with self._lock:
            for key, (n, last) in counts.items():
                slot = self._counts.get(key)
                if slot is not None:
                    slot[0] += n
                    slot[1] = max(slot[1], last)
                elif len(self._counts) < MAX_PENDING_KEYS:
                    self._counts[key] = [n, last]
                else:
                    self.lost += n
            for k, n in seen.items():
                self._seen[k] = self._seen.get(k, 0) + n
            room = MAX_PENDING_ROWS - len(self._rows)
            self._rows[:0] = rows[:room]

    def _write(self) -> bool:
        """Write what is pending; ``True`` when it was held back because another writer held
        SQLite's lock (busy: worth trying again at once), else ``False``."""
        counts, seen, rows = self._take()
        if not counts and not seen:
            return False
        try:
            with self.store.engine.begin() as conn:
                kept = self._store(conn, counts, seen, rows)
        except SQLAlchemyError as exc:
            # down, locked or not migrated yet: held; anything else is a row the store refused
            if isinstance(exc, OperationalError | ProgrammingError) or not self.store.ping():
                self._put_back(counts, seen, rows)
                log.warning(
                    "request errors held until the store returns: %s", str(exc).splitlines()[0]
                )
                return "database is locked" in str(exc)
            kept = self._piecewise(counts, seen, rows, exc)
        else:
            self.counted += sum(n for n, _ in counts.values())
        self.written += kept
        self.dropped += sum(seen.values()) - kept
        return False

    def _piecewise(
        self,
        counts: dict[_Key, list[int]],
        seen: dict[tuple[int, str], int],
        rows: list[ErrorNote],
        exc: Exception,
    ) -> int:
        """The batch was refused with the store up: each count, and each sink's hour of rows,
        in its own transaction; what is still refused is lost, and counted."""
        log.warning(
            "request errors: a batch refused (%s); retried piece by piece", str(exc).splitlines()[0]
        )
        kept = 0
        for key, slot in counts.items():
            try:
                with self.store.engine.begin() as conn:
                    _add_counts(conn, {key: slot})
                self.counted += slot[0]
            except SQLAlchemyError:
                self.lost += slot[0]
        for group, n in seen.items():
            mine = [r for r in rows if (hour_of(r.created_ms), r.sink) == group]
            try:
                with self.store.engine.begin() as conn:
                    kept += _add_rows(conn, group, n, mine, self.rows_per_hour)
            except SQLAlchemyError:  # the errors seen, then row by row
                parts = [(n - len(mine), []), *((1, [row]) for row in mine)]
                for k, part in parts:
                    try:
                        with self.store.engine.begin() as conn:
                            kept += _add_rows(conn, group, k, part, self.rows_per_hour)
                    except SQLAlchemyError:
                        self.lost += k
        return kept

    def _store(
        self,
        conn: Connection,
        counts: dict[_Key, list[int]],
        seen: dict[tuple[int, str], int],
        rows: list[ErrorNote],
    ) -> int:
        _add_counts(conn, counts)
        by_group: dict[tuple[int, str], list[ErrorNote]] = {}
        for row in rows:
            by_group.setdefault((hour_of(row.created_ms), row.sink or ""), []).append(row)
        kept = 0
        for group in sorted(seen):  # key order: concurrent replicas lock in the same order
            kept += _add_rows(conn, group, seen[group], by_group.get(group, []), self.rows_per_hour)
        return kept

    def close(self) -> None:
        """Stop the thread and write what is left (shutdown)."""
        self._stop = True
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=5)
        if self.pending:
            self.flush()


def _add_counts(conn: Connection, counts: dict[_Key, list[int]]) -> None:
    """Add ``counts`` to the roll-ups: one upsert, its rows in key order (no deadlock between
    replicas)."""
    if not counts:
        return
    names = ("hour_ms", "sink", "code", "status", "route")
    rows = [
        {**dict(zip(names, key, strict=True)), "n": n, "last_ms": at}
        for key, (n, at) in sorted(counts.items())
    ]
    upsert(conn, ROLLUP, rows, names, ["n"], "last_ms")


def _add_rows(
    conn: Connection, group: tuple[int, str], seen: int, rows: Iterable[ErrorNote], cap: int
) -> int:
    """Count ``seen`` errors of a sink's hour in the samples and keep as many of ``rows`` as the
    cap leaves room for; returns the rows kept. The upsert comes first: on PostgreSQL it locks
    the hour's samples row, so replicas writing the same sink's hour take turns."""
    hour, sink = group
    row = {"hour_ms": hour, "sink": sink, "seen": seen, "kept": 0}
    upsert(conn, SAMPLES, row, ["hour_ms", "sink"], ["seen"])
    where = (SAMPLES.c.hour_ms == hour, SAMPLES.c.sink == sink)
    kept = int(conn.execute(select(SAMPLES.c.kept).where(*where)).scalar_one())
    take = list(rows)[: max(0, cap - kept)]
    if take:
        conn.execute(insert(RequestErrorRow), [asdict(r) for r in take])
        conn.execute(update(SAMPLES).where(*where).values(kept=SAMPLES.c.kept + len(take)))
    return len(take)
