"""Shared by the service tests: a real uvicorn on a loopback port (18100–18199) in a thread,
tokens, sample envelopes, and throwaway PostgreSQL databases on the shared server."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from wai_dispatch.conformance import envelopes_dir

PORTS = range(18100, 18200)
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SAMPLE_JSON = envelopes_dir() / "bmshj2018-demo-q3.json"
SAMPLE_CBOR = envelopes_dir() / "bmshj2018-demo-q3.cbor"
REPLICATE = envelopes_dir() / "bmshj2018-demo-q3-replicate.json"
_taken: set[int] = set()
_lock = threading.Lock()


def free_port(exclude: tuple[int, ...] = ()) -> int:
    with _lock:
        for port in PORTS:
            if port in _taken or port in exclude:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _taken.add(port)
            return port
    raise RuntimeError("no free port in 18100–18199")


@dataclass
class Live:
    """A running service: its URL, app, and a token per role (``sink`` files as ``sink-a``)."""

    url: str
    app: Any
    tokens: dict[str, str]

    @property
    def service(self) -> Any:
        return self.app.state.service

    def client(self, role: str | None = "sink", **kw: Any) -> httpx.Client:
        headers = {} if role is None else {"Authorization": f"Bearer {self.tokens[role]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kw)


@contextlib.contextmanager
def serve(data_dir: Path, **settings: Any) -> Iterator[Live]:
    """Start the app on uvicorn in a thread; tokens created first (sink-a, sink-b, operator;
    the admin token is the one the first start writes)."""
    import uvicorn

    from wai_dispatch.service import tokens
    from wai_dispatch.service.app import create_app
    from wai_dispatch.service.settings import load
    from wai_dispatch.service.store import ReportStore

    port = free_port()
    chosen = load(data_dir=data_dir, port=port, **settings)
    store = ReportStore(chosen.url)
    store.migrate()
    made = {
        "sink": tokens.create(store, "sink-a", tokens.Role.sink),
        "sink-b": tokens.create(store, "sink-b", tokens.Role.sink),
        "operator": tokens.create(store, "ops", tokens.Role.operator),
    }
    store.dispose()
    app = create_app(chosen)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    made["admin"] = (data_dir / "admin-token").read_text().strip()
    try:
        yield Live(f"http://127.0.0.1:{port}", app, made)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        with _lock:
            _taken.discard(port)


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A fresh database on the shared PostgreSQL, dropped afterwards; yields its URL."""
    from sqlalchemy import create_engine, text

    name = f"wai_svc_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def pg_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


def envelope_of_latent(store_root: Path, height: int, width: int, **extra: Any) -> bytes:
    """A JSON envelope for the bundled set whose payload codes a zero latent of the shape."""
    from wai_dispatch.codec import payload
    from wai_dispatch.codec.envelope import Envelope
    from wai_dispatch.codec.sets import SetStore, ensure_bundled
    from wai_dispatch.codec.tables import EntropyTables

    store = SetStore(store_root)
    ensure_bundled(store)
    entry = store.list()[0]
    files = store.open(entry.digest)
    tables = EntropyTables.from_json(files.read(files.facts["tables"]))
    symbols = np.zeros((1, tables.channels, height, width), dtype=np.int32)
    body = payload.encode(symbols, tables)
    return Envelope(capability=entry.capability, payload=body, set=entry.digest, **extra).to_json()
