"""docs/operations.md's procedures, each run once as the guide writes it (the shell blocks
marked ``<!-- run: NAME -->``): an online SQLite backup of a live store while reports are being
written, restored into a fresh data directory; a PostgreSQL dump and restore; the schema moved
down one revision at a time and back up on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import _svc
import pytest
from sqlalchemy import create_engine, inspect, text

from wai_dispatch.service.store import migrations
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools.seed_reports import seed

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "operations.md").read_text()
#: Every migration, in order (their files are numbered as their down_revision chain runs).
REVISIONS = sorted(
    f.name[:4]
    for f in (Path(migrations.__file__).parent / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")
)


def procedure(name: str) -> str:
    found = re.findall(rf"<!-- run: {re.escape(name)} -->\n```sh\n(.*?)```", GUIDE, re.S)
    assert len(found) == 1, f"docs/operations.md has no one block marked run: {name}"
    return str(found[0])


def run(name: str, **env: str | Path) -> str:
    """Run the guide's block ``name`` with bash (errexit, pipefail) and ``env``; its stdout.
    ``python`` is the interpreter running the tests (the one with wai-dispatch installed)."""
    bindirs = [str(Path(sys.executable).parent)]
    bindirs += [str(Path(p).parent) for p in (_svc.pg_bin("pg_dump"),) if p]
    full = {**os.environ, **{k: str(v) for k, v in env.items()}}
    full["PATH"] = os.pathsep.join([*bindirs, full["PATH"]])
    full["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this checkout's import root
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", procedure(name)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, f"{name}: {out.stdout}\n{out.stderr}"
    return out.stdout


class Writer(threading.Thread):
    """Reports written into ``store`` in batches until stopped, as a live service does."""

    def __init__(self, store: ReportStore) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.batches = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                seed(self.store, 50, sinks=3, days=1, seed_value=1000 + self.batches)
                self.batches += 1
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait_for(self, batches: int) -> None:
        while self.batches < batches:
            assert self.error is None and self.is_alive(), self.error
            self.stop.wait(0.01)

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=60)
        assert self.error is None, self.error


def count_rows(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM reports")).scalar_one())
    finally:
        engine.dispose()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 program is not installed")
def test_sqlite_online_backup_while_writing_then_restore(tmp_path: Path) -> None:
    data, backup, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    store.migrate()
    (data / "admin-token").write_text("secret\n")
    (data / "sets").mkdir()
    (data / "sets" / "marker").write_text("a set\n")
    writer = Writer(store)
    writer.start()
    try:
        writer.wait_for(3)
        before = store.count()
        run("sqlite-backup", WAI_DATA_DIR=data, BACKUP=backup)
        writer.wait_for(writer.batches + 3)  # still writing after the backup
    finally:
        writer.finish()
    after = store.count()
    assert (data / "reports.db-wal").exists()  # the live store was in WAL mode throughout
    backed_up = count_rows(f"sqlite:///{backup / 'reports.db'}")
    assert before <= backed_up < after
    assert backed_up % 50 == 0  # whole transactions only: a consistent snapshot

    out = run("sqlite-restore", BACKUP=backup, RESTORE_DATA_DIR=restored)
    assert out.strip() == "ok"
    assert (restored / "admin-token").read_text() == "secret\n"
    assert (restored / "sets" / "marker").read_text() == "a set\n"
    again = ReportStore(f"sqlite:///{restored / 'reports.db'}")
    again.migrate()  # what serve does at start
    assert again.count() == backed_up
    again.dispose()
    store.dispose()


@pytest.mark.slow
def test_postgres_dump_while_writing_then_restore(
    postgres: str, postgres_url: str, tmp_path: Path
) -> None:
    if _svc.pg_bin("pg_dump") is None or _svc.pg_bin("pg_restore") is None:
        pytest.skip("pg_dump/pg_restore are not installed")
    store = ReportStore(postgres_url)
    store.migrate()
    writer = Writer(store)
    writer.start()
    backup = tmp_path / "backup"
    try:
        writer.wait_for(3)
        before = store.count()
        # the SQLAlchemy form docs/scaling.md uses, which libpq alone does not read
        url = postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
        run("postgres-backup", WAI_DATABASE_URL=url, BACKUP=backup)
        writer.wait_for(writer.batches + 3)
    finally:
        writer.finish()
    after = store.count()
    store.dispose()
    with _svc.pg_database(postgres) as fresh:
        run("postgres-restore", NEW_DATABASE_URL=fresh, BACKUP=backup)
        restored = ReportStore(fresh)
        restored.migrate()
        n = restored.count()
        restored.dispose()
    assert before <= n < after and n % 50 == 0


def _revision(url: str) -> str | None:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def _down_and_up(url: str) -> None:
    store = ReportStore(url)
    store.migrate()
    seed(store, 40, sinks=2, days=1)
    assert _revision(url) == REVISIONS[-1]
    # one revision down keeps the reports; back up to head
    assert REVISIONS[-2] in run("alembic-migrate", WAI_DATABASE_URL=url, REVISION="-1")
    assert _revision(url) == REVISIONS[-2] and store.count() == 40
    run("alembic-migrate", WAI_DATABASE_URL=url, REVISION="head")
    assert _revision(url) == REVISIONS[-1] and store.count() == 40
    # every revision's downgrade, one at a time, to the base
    for expected in [*reversed(REVISIONS[:-1]), None]:
        run("alembic-migrate", WAI_DATABASE_URL=url, REVISION="-1")
        assert _revision(url) == expected
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
    engine.dispose()
    store.migrate()  # what serve does at start: the base up to head
    assert _revision(url) == REVISIONS[-1] and store.count() == 0
    seed(store, 5, sinks=1, days=1)
    assert store.count() == 5
    store.dispose()


@pytest.mark.slow
def test_migrations_down_and_up_on_sqlite(tmp_path: Path) -> None:
    _down_and_up(f"sqlite:///{tmp_path / 'reports.db'}")


@pytest.mark.slow
def test_migrations_down_and_up_on_postgres(postgres_url: str) -> None:
    _down_and_up(postgres_url)
