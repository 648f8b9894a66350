"""The report store: a SQLAlchemy engine over SQLite (default, a file in the data directory) or
PostgreSQL (``WAI_DATABASE_URL``), migrated by Alembic at start, with idempotent inserts
(service/store/bulk.py): a report whose id, or whose identity ``(sink, request_id, ordinal)``,
is already stored is skipped, so neither a spool replay nor a retried request duplicates one,
nor counts it twice in the per-hour roll-ups (service/store/rollups.py) written with it."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, func, select, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from wai_dispatch.service.store import bulk, bulk_pg, partitions
from wai_dispatch.service.store.errors import DriverMissing
from wai_dispatch.service.store.models import ReportRow
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_keys import by_request
from wai_dispatch.service.store.rollups import DAY_MS

MIGRATIONS = Path(__file__).with_name("migrations")


#: How long a SQLite statement waits for another connection's lock before the store counts
#: as down (and the decode's report is spooled): well under any decode timeout. Only another
#: process's writer makes a statement wait here: this process's writers queue on the
#: store's write lock first (:class:`_WriterConnection`).
SQLITE_BUSY_TIMEOUT_S = 1.0

#: How long a SQLite write transaction waits for this process's other writers (the store's
#: write lock) before the store counts as down: each holds it for one transaction, itself
#: bounded by :data:`SQLITE_BUSY_TIMEOUT_S` a statement.
SQLITE_WRITERS_WAIT_S = 10.0

#: The first words of the statements that only read (no write lock taken for them).
_READS = ("SELECT", "PRAGMA", "EXPLAIN", "VALUES")
_DML = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


def writes(statement: str) -> bool:
    """Whether ``statement`` may write (takes the write lock): anything but a read, a ``WITH``
    (the dashboard's common table expressions) only when it holds a DML keyword."""
    head = statement.lstrip()[:8].upper()
    if head.startswith(_READS):
        return False
    if head.startswith("WITH"):
        return _DML.search(statement) is not None
    return True


class _WriterConnection(sqlite3.Connection):
    """A SQLite connection that holds its store's write lock (a ``threading.Lock`` shared by
    the engine's connections) from its transaction's first write to its commit or rollback,
    so the process's writers take SQLite's one write lock in turn, queued in the process,
    instead of polling it against the busy timeout (SQLite's busy handler sleeps up to 100 ms
    between tries and is not fair: 64 writers polling starve some past any timeout, "database
    is locked"). Its transactions begin ``IMMEDIATE`` (Python's implicit ``BEGIN`` before the
    first write): the write lock is taken at the start, never by upgrading a read."""

    writers: threading.Lock
    held = False

    def hold(self) -> None:
        """Take the write lock for this transaction (no-op when held)."""
        if self.held:
            return
        if not self.writers.acquire(timeout=SQLITE_WRITERS_WAIT_S):
            raise sqlite3.OperationalError(
                "database is locked: this process's other writers held it "
                f"{SQLITE_WRITERS_WAIT_S:g} s"
            )
        self.held = True

    def _release(self) -> None:
        if self.held:
            self.held = False
            self.writers.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._release()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._release()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()


class StoreDown(Exception):
    """The database did not answer (the caller spools)."""


@contextlib.contextmanager
def as_store_down() -> Iterator[None]:
    """SQLAlchemy's errors raised as :class:`StoreDown` (their first line)."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreDown(str(exc).splitlines()[0]) from exc


def make_engine(url: str) -> Engine:
    """An engine for ``url``: SQLite with WAL and a short busy timeout
    (:data:`SQLITE_BUSY_TIMEOUT_S`: a locked file is a store that is down; its folder created), or
    PostgreSQL through psycopg 3 with a short connect timeout and pre-ping."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            with contextlib.suppress(OSError):  # not creatable now: the store is down
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        writers = threading.Lock()  # the engine's write lock (_WriterConnection)
        engine = create_engine(
            url,
            connect_args={
                "check_same_thread": False,
                "timeout": SQLITE_BUSY_TIMEOUT_S,
                "factory": _WriterConnection,
                "isolation_level": "IMMEDIATE",
            },
        )

        @event.listens_for(engine, "before_cursor_execute")
        def _hold(
            _conn: Any, cursor: Any, statement: str, *_args: Any
        ) -> None:  # every write transaction, whoever runs it, takes the write lock first
            if writes(statement):
                cursor.connection.hold()

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.writers = writers
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            # the dashboard's aggregates sort in memory, not in temporary files
            cur.execute("PRAGMA temp_store=MEMORY")
            cur.execute("PRAGMA cache_size=-16384")
            cur.close()

        return engine
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    # SQLAlchemy's dialect imports psycopg; without the postgres extra, say which to install
    if url.startswith("postgresql+psycopg") and importlib.util.find_spec("psycopg") is None:
        raise DriverMissing
    return create_engine(
        url, pool_pre_ping=True, pool_size=5, max_overflow=5, connect_args={"connect_timeout": 3}
    )


class ReportStore:
    """Where reports and tokens live. Every method raises :class:`StoreDown` when the database
    does not answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.dialect = self.engine.dialect.name
        #: PostgreSQL: the engine :meth:`record` writes through (:func:`_write_engine`).
        self.write_engine = _write_engine(self.engine) if self.dialect == "postgresql" else None
        self._ready_day = -1  # the day whose partitions :meth:`record` has made ready

    def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic; a no-op when it is there); on
        PostgreSQL, make today's and the next days' partitions of ``reports``
        (service/store/partitions.py)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with as_store_down(), self.engine.begin() as conn:
            if self.dialect == "postgresql":  # several workers may start at once
                conn.execute(text("SELECT pg_advisory_xact_lock(74201)"))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            if self.dialect == "postgresql":  # today's and the next days' partitions
                partitions.ensure(conn, int(time.time() * 1000))

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    def insert(self, records: Iterable[ReportRecord]) -> int:
        """Store the records in one transaction (one multi-row insert, service/store/bulk.py);
        a record whose id or identity is stored is skipped. Returns how many were new."""
        with as_store_down(), self.engine.begin() as conn:
            return len(bulk.insert_records(conn, records))

    def rows(self, records: Sequence[ReportRecord]) -> list[Any] | None:
        """What :meth:`record` takes as ``rows`` for ``records`` (PostgreSQL: the statement's
        columns, service/store/bulk_pg.py; SQLite: nothing), made by the caller's thread."""
        return list(bulk_pg.columns(records)) if self.dialect == "postgresql" else None

    def record(
        self, records: Sequence[ReportRecord], rows: Sequence[Any] | None = None
    ) -> list[str]:
        """Store one or more requests' records in one transaction, as :meth:`insert`; returns
        each record's stored id: its own, or the first decode's when its identity ``(sink,
        request_id, ordinal)`` was stored before (a retried request). ``rows``: the records'
        :meth:`rows`, when made already.

        On PostgreSQL the records go in as one statement outside any transaction block
        (:func:`_write_engine`): the statement is its own transaction, committed (its WAL
        flushed) before the server answers, so a batch costs one round trip where ``BEGIN``,
        the statement and ``COMMIT`` cost three, and a pooled connection is not pinged first.
        A connection found dead (the server restarted since it was pooled) is dropped and the
        batch sent once more on a fresh one: had the first statement committed before its
        answer was lost, the keys skip every report of it the second time and the stored ids
        are read back as for a retried request, so nothing is stored twice."""
        if self.write_engine is None:
            with as_store_down(), self.engine.begin() as conn:
                return bulk.record(conn, records, rows)
        now = int(time.time() * 1000)
        if now // DAY_MS != self._ready_day:  # today's partitions: once a day
            with as_store_down(), self.engine.begin() as conn:
                partitions.ensure(conn, now)
            self._ready_day = now // DAY_MS
        with as_store_down():
            try:
                with self.write_engine.connect() as conn:
                    return bulk.record(conn, records, rows, ready=False)
            except DBAPIError as exc:
                if not exc.connection_invalidated:
                    raise
            with self.write_engine.connect() as conn:
                return bulk.record(conn, records, rows, ready=False)

    def asked(self, sink: str, request_id: str) -> str | None:
        """The digest of what the request ``(sink, request_id)`` stored asked (``None``: no
        report of it is stored, or none kept its digest)."""
        c = ReportRow.__table__.c
        query = select(c.request_digest).where(
            by_request(request_id, sink), c.request_digest.is_not(None)
        )
        with as_store_down(), self.engine.connect() as conn:
            return conn.execute(query.limit(1)).scalar()

    def count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(ReportRow)).scalar_one())

    def dispose(self) -> None:
        if self.write_engine is not None:
            self.write_engine.dispose()
        self.engine.dispose()


def _write_engine(engine: Engine) -> Engine:
    """The engine :meth:`ReportStore.record` writes reports through on PostgreSQL: ``engine``'s
    own settings but each statement its own transaction (``AUTOCOMMIT``: the batch is one
    statement, service/store/bulk_pg.py) and no ping when a connection is checked out (a dead
    one fails the statement, which is sent once more)."""
    return create_engine(
        engine.url,
        isolation_level="AUTOCOMMIT",
        pool_size=5,
        max_overflow=5,
        connect_args={"connect_timeout": 3},
    )
