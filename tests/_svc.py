"""Shared by the service tests: the app in process (httpx's ASGITransport, the app's lifespan
run), a real uvicorn on a loopback port (18100–18199) in a thread for the end-to-end tests,
tokens, sample envelopes, and throwaway PostgreSQL databases. tests/conftest.py makes fixtures
of these (``app_service``, ``app_client``, ``live_service``, ``postgres``, ``postgres_url``)."""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
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


def _prepared(data_dir: Path, port: int, **settings: Any) -> tuple[Any, dict[str, str]]:
    """The settings and the app for a data directory, tokens created first (sink-a, sink-b,
    operator; the admin token is the one the first start writes)."""
    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load
    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    settings.setdefault("warm", False)  # a test that needs warming asks for it
    chosen = load(data_dir=data_dir, port=port, **settings)
    store = ReportStore(chosen.url)
    store.migrate()
    made = {
        "sink": bearer.create(store, "sink-a", bearer.Role.sink),
        "sink-b": bearer.create(store, "sink-b", bearer.Role.sink),
        "operator": bearer.create(store, "ops", bearer.Role.operator),
    }
    store.dispose()
    return create_app(chosen), made


class PortalClient:
    """A blocking face on ``httpx.AsyncClient(transport=httpx.ASGITransport(app))``: each call
    runs on the event loop of the app's lifespan (an anyio blocking portal), so a test written
    against :class:`Live`'s ``httpx.Client`` runs in process unchanged."""

    def __init__(self, portal: Any, client: httpx.AsyncClient) -> None:
        self._portal = portal
        self._client = client

    def __enter__(self) -> PortalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._portal.call(self._client.aclose)

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return self._portal.call(lambda: self._client.request(method, url, **kw))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)


@dataclass
class InProcess:
    """The app in process (no socket): the same face as :class:`Live`, its clients going
    through httpx's ASGITransport on the loop that ran the app's lifespan."""

    app: Any
    tokens: dict[str, str]
    portal: Any
    url: str = "http://testserver"

    @property
    def service(self) -> Any:
        return self.app.state.service

    def async_client(self, role: str | None = "sink", **kw: Any) -> httpx.AsyncClient:
        headers = {} if role is None else {"Authorization": f"Bearer {self.tokens[role]}"}
        transport = httpx.ASGITransport(app=self.app)
        return httpx.AsyncClient(
            transport=transport, base_url=self.url, headers=headers, timeout=60, **kw
        )

    def client(self, role: str | None = "sink", **kw: Any) -> PortalClient:
        return PortalClient(self.portal, self.portal.call(lambda: self.async_client(role, **kw)))


@contextlib.contextmanager
def in_process(data_dir: Path, **settings: Any) -> Iterator[InProcess]:
    """The app with its lifespan run (the service started, the admin token written) on an
    anyio blocking portal's loop; requests go through httpx's ASGITransport."""
    from anyio.from_thread import start_blocking_portal

    app, made = _prepared(data_dir, 8000, **settings)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):
        made["admin"] = (data_dir / "admin-token").read_text().strip()
        yield InProcess(app, made, portal)


@contextlib.asynccontextmanager
async def lifespan_of(app: Any) -> AsyncIterator[Any]:
    """Run an app's lifespan in the current (anyio) event loop."""
    async with app.router.lifespan_context(app):
        yield app


@contextlib.contextmanager
def serve(data_dir: Path, **settings: Any) -> Iterator[Live]:
    """Start the app on uvicorn in a thread; tokens created first (sink-a, sink-b, operator;
    the admin token is the one the first start writes)."""
    import uvicorn

    port = free_port()
    app, made = _prepared(data_dir, port, **settings)
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


def pg_bin(name: str) -> str | None:
    """A PostgreSQL program: on the PATH, else in Debian's /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


class Cluster:
    """A throwaway PostgreSQL cluster on a loopback port (run as ``postgres`` under root)."""

    def __init__(self, root: Path, port: int) -> None:
        self.dir = root / "pgdata"
        self.port = port
        self.log = root / "pg.log"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            pw = pwd.getpwnam("postgres")
            os.chown(root, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.dir), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _run(self, name: str, *args: str) -> None:
        program = pg_bin(name)
        assert program is not None, f"{name} not found"
        subprocess.run(
            [*self.as_user, program, *args], check=True, capture_output=True, timeout=120
        )

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "-D", str(self.dir), "-l", str(self.log), "-o", opts, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-m", mode, "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@contextlib.contextmanager
def private_cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="wai-pg-"))
    os.chmod(root, 0o755)
    cluster = Cluster(root, free_port())
    cluster.start()
    try:
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


_shared: list[Any] = []


def pg_admin_url() -> str | None:
    """The shared server on 127.0.0.1:5432 when it answers; else a private cluster started
    once for this test session (where initdb exists); else ``None``."""
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return PG_ADMIN
    except OSError:
        pass
    if pg_bin("initdb") is None or pg_bin("pg_ctl") is None:
        return None
    if not _shared:
        manager = private_cluster()
        cluster = manager.__enter__()
        atexit.register(manager.__exit__, None, None, None)
        _shared.append(cluster)
    return "postgresql+psycopg://" + _shared[0].url.split("://", 1)[1]


def pg_available() -> bool:
    return pg_admin_url() is not None


@contextlib.contextmanager
def pg_database(admin_url: str | None = None) -> Iterator[str]:
    """A fresh database on PostgreSQL (:func:`pg_admin_url`), dropped afterwards; its URL."""
    from sqlalchemy import create_engine, text

    admin_url = admin_url or pg_admin_url()
    assert admin_url is not None
    name = f"wai_svc_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0].replace("+psycopg", "") + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def envelope_of_latent(store_root: Path, height: int, width: int, **extra: Any) -> bytes:
    """A JSON envelope for the bundled set whose payload codes a zero latent of the shape."""
    from wai_dispatch.codec import payload
    from wai_dispatch.codec.envelope import Envelope
    from wai_dispatch.codec.tables import EntropyTables
    from wai_dispatch.service.decoding.decoder import Decoder

    store = Decoder.assemble(store_root, adapters={}).set_store
    entry = store.list()[0]
    files = store.open(entry.digest)
    tables = EntropyTables.from_json(files.read(str(files.facts.tables)))
    symbols = np.zeros((1, tables.channels, height, width), dtype=np.int32)
    body = payload.encode(symbols, tables)
    return Envelope(capability=entry.capability, payload=body, set=entry.digest, **extra).to_json()


def cursor_params(route: str) -> Any:
    """A hypothesis strategy of query parameters for ``route`` with a paging cursor shaped like
    the service's (service/store/keyset.py: base64url of a JSON list, a tag then the position)
    whose parts are of any type and size (ints past a BIGINT, floats, text, null, booleans,
    lists): random strings rarely decode, so a fuzz reaches the typed checks only with these.
    The tag is the list's own (a fleet tag with its sort and order) or another list's."""
    import base64
    import json

    from hypothesis import strategies as st

    from wai_dispatch.service.store.fleet import SET_SORTS, SINK_SORTS

    own = {
        "/v1/reports": ["t"],
        "/v1/request-errors": ["e"],
        "/v1/run-reports/summary": ["rr"],
        "/v1/fleet/sinks": [f"sink:{s}:{d}" for s in SINK_SORTS for d in (0, 1)],
        "/v1/fleet/sets": [f"set:{s}:{d}" for s in SET_SORTS for d in (0, 1)],
        "/v1/fleet/exact": ["exact"],
    }
    every = [t for tags in own.values() for t in tags]
    edges = st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 10**30])
    odd = st.floats() | st.none() | st.booleans() | st.lists(st.integers(), max_size=2)
    part = edges | st.text(max_size=8) | st.integers() | odd
    # mostly the list's own tag and arity (a position is two parts, the exact tier's three):
    # the checks of each part
    n = 3 if route == "/v1/fleet/exact" else 2
    arity = st.lists(part, min_size=n, max_size=n) | st.lists(part, max_size=4)

    def params(tag: str, parts: list[Any]) -> dict[str, str]:
        text = json.dumps([tag, *parts]).encode()
        out = {
            "cursor" if route == "/v1/reports" else "after": base64.urlsafe_b64encode(text)
            .decode()
            .rstrip("=")
        }
        if tag.count(":") == 2:
            out["sort"], desc = tag.split(":")[1:]
            out["desc"] = "true" if desc == "1" else "false"
        return out

    mine = st.sampled_from(own.get(route, every))
    return st.builds(params, mine | mine | mine | st.sampled_from(every), arity)
