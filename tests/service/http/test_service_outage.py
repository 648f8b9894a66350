"""Nothing lost: a private PostgreSQL cluster is stopped mid-run under load and restarted;
decodes keep answering (their reports spooled, fsync'd), the spool is replayed in order when
the store is back, and every acknowledged report is in the store exactly once."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _svc import SAMPLE_JSON, Cluster, PortalClient, pg_bin, private_cluster, serve
from sqlalchemy import create_engine, text

JSON = {"Content-Type": "application/json"}

pytestmark = [
    pytest.mark.skipif(
        pg_bin("initdb") is None or pg_bin("pg_ctl") is None, reason="no initdb/pg_ctl"
    ),
    pytest.mark.postgres,  # a private cluster of its own, stopped and started mid-run
    pytest.mark.slow,
]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with private_cluster() as running:
        yield running


def test_store_outage_under_load_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    acked: list[str] = []
    failures: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()
    body = SAMPLE_JSON.read_bytes()

    with serve(tmp_path / "data", database_url=cluster.url, decode_threads=2, queue=32) as live:
        headers = {
            "Authorization": f"Bearer {live.tokens['sink']}",
            "Content-Type": "application/json",
        }

        def load() -> None:
            with httpx.Client(base_url=live.url, timeout=60) as c:
                while not stop.is_set():
                    r = c.post("/v1/decode", content=body, headers=headers)
                    with lock:
                        if r.status_code == 200:
                            acked.extend(r.json()["report_ids"])
                        else:
                            failures.append(f"{r.status_code} {r.text[:200]}")

        def wait_for(n: int) -> None:
            deadline = time.monotonic() + 60
            while len(acked) < n and time.monotonic() < deadline:
                time.sleep(0.05)

        workers = [threading.Thread(target=load) for _ in range(3)]
        for w in workers:
            w.start()
        try:
            wait_for(8)
            before = len(acked)
            cluster.stop()  # mid-run, decodes in flight
            wait_for(before + 12)
            with httpx.Client(base_url=live.url) as c:
                ready = c.get("/readyz").json()
                spooled = live.service.recorder.pending_bytes()
                metrics = c.get("/metrics").text
            during = len(acked) - before
            cluster.start()
            wait_for(len(acked) + 8)
        finally:
            stop.set()
            for w in workers:
                w.join()
        deadline = time.monotonic() + 60
        while live.service.recorder.pending_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert live.service.recorder.pending_bytes() == 0

    assert failures == []
    assert during >= 12
    assert ready["store"] == "spooling" and ready["status"] == "ready"
    gauge = next(ln for ln in metrics.splitlines() if ln.startswith("wai_spool_bytes "))
    assert spooled > 0 and float(gauge.split()[1]) > 0
    assert "wai_store_up 0.0" in metrics
    engine = create_engine("postgresql+psycopg://" + cluster.url.split("://", 1)[1])
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, count(*) FROM reports GROUP BY id")).all()
        total = conn.execute(text("SELECT count(*) FROM reports")).scalar_one()
    engine.dispose()
    stored = {r[0]: r[1] for r in rows}
    assert len(set(acked)) == len(acked)
    assert set(acked) <= set(stored)  # every acknowledged report is there…
    assert all(n == 1 for n in stored.values())  # …exactly once
    assert total == len(acked)


def test_a_replica_started_in_an_outage_answers_503_not_401(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 29: a replacement replica (a fresh data directory, no token view) started while
    PostgreSQL is down cannot check any token: every one, the admin's, a sink's and a garbage
    one, is 503 ``token_store_down`` with ``Retry-After`` (a client retries), never 401. The
    store back, the sink's retried decode is stored exactly once."""
    from anyio.from_thread import start_blocking_portal

    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load

    with serve(tmp_path / "a", database_url=cluster.url) as first:
        tokens = dict(first.tokens)
    cluster.stop()
    body = SAMPLE_JSON.read_bytes()
    settings = load(data_dir=tmp_path / "b", database_url=cluster.url, warm=False)
    app = create_app(settings)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):

        async def post(secret: str) -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://b") as c:
                headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
                return await c.post("/v1/decode", content=body, headers=headers)

        for secret in (tokens["sink"], tokens["admin"], "wai_not-a-token"):
            r = portal.call(post, secret)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "token_store_down"
            assert r.headers["Retry-After"] == "5"
        cluster.start()
        deadline = time.monotonic() + 60
        while (r := portal.call(post, tokens["sink"])).status_code == 503:
            assert r.json()["error"]["code"] == "token_store_down", r.text
            assert time.monotonic() < deadline
            time.sleep(float(r.headers["Retry-After"]) / 10)
        assert r.status_code == 200, r.text
        ids = r.json()["report_ids"]
        assert portal.call(post, "wai_not-a-token").status_code == 401  # the store says so now
        service = app.state.service
        while service.recorder.pending_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
    engine = create_engine("postgresql+psycopg://" + cluster.url.split("://", 1)[1])
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, count(*) FROM reports WHERE id = ANY(:ids) GROUP BY id"), {"ids": ids}
        ).all()
    engine.dispose()
    assert sorted(rows) == sorted((i, 1) for i in ids)


def test_a_replica_started_in_an_outage_decodes_on_the_fleets_token_snapshot(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 29, item 4: the same outage, the replicas sharing a spool volume. The first,
    reading the store, wrote the token snapshot there; the fresh replica (its own data
    directory, its own spool folder) checks the sink's token against it: the decode answers
    200, its report spooled; a token the snapshot lacks is 503 ``token_store_down``, never 401.
    The store back, the spooled report is stored exactly once."""
    from anyio.from_thread import start_blocking_portal

    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load

    shared = tmp_path / "volume"
    with serve(tmp_path / "a", database_url=cluster.url, spool_dir=shared, replica_id="a") as a:
        tokens = dict(a.tokens)
    assert (shared / "tokens.snapshot").exists()
    cluster.stop()
    body = SAMPLE_JSON.read_bytes()
    settings = load(
        data_dir=tmp_path / "b",
        database_url=cluster.url,
        spool_dir=shared,
        replica_id="b",
        warm=False,
    )
    app = create_app(settings)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):

        async def post(secret: str) -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://b") as c:
                headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
                return await c.post("/v1/decode", content=body, headers=headers)

        service = app.state.service
        assert service.tokens.source == "snapshot"
        r = portal.call(post, tokens["sink"])
        assert r.status_code == 200, r.text
        ids = r.json()["report_ids"]
        assert service.recorder.pending_bytes() > 0  # spooled: the store is down
        r = portal.call(post, "wai_not-a-token")
        assert r.status_code == 503 and r.json()["error"]["code"] == "token_store_down"
        assert r.headers["Retry-After"] == "5"
        cluster.start()
        deadline = time.monotonic() + 60
        while service.recorder.pending_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert service.recorder.pending_bytes() == 0
    engine = create_engine("postgresql+psycopg://" + cluster.url.split("://", 1)[1])
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT id, count(*) FROM reports WHERE id = ANY(:ids) GROUP BY id"), {"ids": ids}
        ).all()
    engine.dispose()
    assert sorted(rows) == sorted((i, 1) for i in ids)


@contextlib.contextmanager
def _stoppable(kind: str, tmp_path: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """A store's URL and how to stop it: a private PostgreSQL cluster, or a SQLite file whose
    folder is moved away (a file put in its place)."""
    if kind == "postgresql":
        with private_cluster() as cluster:
            yield cluster.url, cluster.stop
        return
    (tmp_path / "db").mkdir()

    def stop() -> None:
        (tmp_path / "db").rename(tmp_path / "db-away")
        (tmp_path / "db").write_bytes(b"")

    yield f"sqlite:///{tmp_path / 'db' / 'reports.db'}", stop


@contextlib.contextmanager
def _born_in_outage(tmp_path: Path, url: str, shared: Path) -> Iterator[Any]:
    """A fresh replica on the fleet's spool volume, its store down: its blocking portal and
    app (requests through httpx's ASGITransport)."""
    from anyio.from_thread import start_blocking_portal

    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load

    settings = load(data_dir=tmp_path / "b", database_url=url, spool_dir=shared,
                    replica_id="b", warm=False)  # fmt: skip
    app = create_app(settings)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b")
        yield PortalClient(portal, client), app
        portal.call(client.aclose)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_token_revoked_with_no_replica_running_is_refused_in_an_outage(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36, item 4: a replica on the fleet's volume wrote the snapshot and stopped;
    ``wai-dispatch tokens revoke`` ran with no replica running (it rewrites the snapshot);
    the store then stopped and a fresh replica started: the revoked token is 401, another
    sink's (in the snapshot) is let in."""
    from wai_dispatch.cli.main import main

    shared = tmp_path / "volume"
    with _stoppable(kind, tmp_path) as (url, stop):
        with serve(tmp_path / "a", database_url=url, spool_dir=shared, replica_id="a") as a:
            tokens = dict(a.tokens)
        monkeypatch.setenv("WAI_DATABASE_URL", url)
        monkeypatch.setenv("WAI_SPOOL_DIR", str(shared))
        assert main(["tokens", "revoke", "sink-a", "--data-dir", str(tmp_path / "cli")]) == 0
        stop()
        with _born_in_outage(tmp_path, url, shared) as (client, app):
            assert app.state.service.tokens.source == "snapshot"
            bearer = {"Authorization": f"Bearer {tokens['sink']}"}
            r = client.get("/v1/paths", headers=bearer)
            assert r.status_code == 401, r.text
            bearer = {"Authorization": f"Bearer {tokens['sink-b']}"}
            assert client.get("/v1/paths", headers=bearer).status_code == 200


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_replica_born_in_an_outage_answers_503_for_a_set_it_cannot_confirm(
    kind: str, tmp_path: Path
) -> None:
    """Issue 36, item 5: a set this replica lacks while the set registry does not answer may
    be installed there: 503 ``set_registry_down`` with ``Retry-After`` (a decode naming it,
    and ``GET /v1/sets/{digest}``), never 404 ``set_not_installed``, which a replica that
    reads the registry answers. A set in its cache is served (and ``/readyz`` is ready on the
    cache's sets, saying the registry is not read yet)."""
    shared = tmp_path / "volume"
    doc = json.loads(SAMPLE_JSON.read_text())
    here, absent = doc["set"], "0" * 64
    unknown = json.dumps({**doc, "set": absent}).encode()
    with _stoppable(kind, tmp_path) as (url, stop):
        with serve(tmp_path / "a", database_url=url, spool_dir=shared, replica_id="a") as a:
            bearer = {"Authorization": f"Bearer {a.tokens['sink']}"}
            r = httpx.get(f"{a.url}/v1/sets/{absent}", headers=bearer)
            assert r.status_code == 404 and r.json()["error"]["code"] == "set_not_installed"
        stop()
        with _born_in_outage(tmp_path, url, shared) as (client, _):
            for r in (
                client.get(f"/v1/sets/{absent}", headers=bearer),
                client.post("/v1/decode", content=unknown, headers={**bearer, **JSON}),
            ):
                assert r.status_code == 503, r.text
                assert r.json()["error"]["code"] == "set_registry_down"
                assert r.headers["Retry-After"] == "5"
            assert client.get(f"/v1/sets/{here}", headers=bearer).status_code == 200
            assert client.get("/readyz").json()["registry"] == "not read yet"
