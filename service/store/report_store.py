"""The report store: a SQLAlchemy engine over SQLite (default, a file in the data directory) or
PostgreSQL (``WAI_DATABASE_URL``), migrated by Alembic at start, with idempotent inserts
(service/store/bulk.py): a report whose id, or whose identity ``(sink, request_id, ordinal)``,
is already stored is skipped, so neither a spool replay nor a retried request duplicates one,
nor counts it twice in the per-hour roll-ups (service/store/rollups.py) written with it."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, func, select, text
from sqlalchemy.exc import SQLAlchemyError

from wai_dispatch.service.store import bulk, bulk_pg
from wai_dispatch.service.store.errors import DriverMissing
from wai_dispatch.service.store.models import ReportRow
from wai_dispatch.service.store.records import ReportRecord

MIGRATIONS = Path(__file__).with_name("migrations")


#: How long a SQLite statement waits for another connection's lock before the store counts
#: as down (and the decode's report is spooled): well under any decode timeout.
SQLITE_BUSY_TIMEOUT_S = 1.0


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
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
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

    def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic; a no-op when it is there)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with as_store_down(), self.engine.begin() as conn:
            if self.dialect == "postgresql":  # several workers may start at once
                conn.execute(text("SELECT pg_advisory_xact_lock(74201)"))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

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
        :meth:`rows`, when made already."""
        with as_store_down(), self.engine.begin() as conn:
            return bulk.record(conn, records, rows)

    def asked(self, sink: str, request_id: str) -> str | None:
        """The digest of what the request ``(sink, request_id)`` stored asked (``None``: no
        report of it is stored, or none kept its digest)."""
        c = ReportRow.__table__.c
        query = select(c.request_digest).where(
            c.sink == sink, c.request_id == request_id, c.request_digest.is_not(None)
        )
        with as_store_down(), self.engine.connect() as conn:
            return conn.execute(query.limit(1)).scalar()

    def count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(ReportRow)).scalar_one())

    def dispose(self) -> None:
        self.engine.dispose()
