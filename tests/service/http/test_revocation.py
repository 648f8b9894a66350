"""Issue 16, item 3: a revoked token is refused within ``token_refresh_s`` on every replica,
the first request after an idle period included. Two apps in process on one SQLite store are
two replicas; the revocation goes through a third connection, as a CLI on another host would.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from anyio.from_thread import start_blocking_portal

from wai_dispatch.service.http.app import create_app
from wai_dispatch.service.settings import load
from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.report_store import ReportStore

BOUND_S = 0.5


@contextlib.contextmanager
def replica(data_dir: Path) -> Iterator[Any]:
    """One app (its lifespan run) and a blocking ``get(path, token)`` on it."""
    app = create_app(load(data_dir=data_dir, token_refresh_s=BOUND_S, page=False, warm=False))
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):

        async def get(path: str, token: str) -> int:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                answer = await client.get(path, headers={"Authorization": f"Bearer {token}"})
                return answer.status_code

        yield lambda path, token: portal.call(get, path, token)


def test_revoked_token_is_refused_within_the_bound_on_every_replica(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = ReportStore(load(data_dir=data_dir).url)  # another process's connection
    store.migrate()
    secret = bearer.create(store, "edge-9", bearer.Role.sink)
    with replica(data_dir) as first, replica(data_dir) as second:
        try:
            assert [first("/v1/paths", secret), second("/v1/paths", secret)] == [200, 200]
            time.sleep(2 * BOUND_S)  # idle: both views are older than the bound now
            bearer.revoke(store, "edge-9")
            time.sleep(BOUND_S)
            # the first request after idle on each replica: refused, not served from the view
            assert [first("/v1/paths", secret), second("/v1/paths", secret)] == [401, 401]
            assert [first("/v1/paths", secret), second("/v1/paths", secret)] == [401, 401]
        finally:
            store.dispose()


def test_a_store_that_is_down_keeps_the_last_view(tmp_path: Path) -> None:
    store = ReportStore(f"sqlite:///{tmp_path / 'reports.db'}")
    store.migrate()
    secret = bearer.create(store, "edge-1", bearer.Role.sink)
    cache = bearer.TokenCache(store, refresh_s=0.05)
    assert cache.lookup(secret) == bearer.Principal("edge-1", bearer.Role.sink)
    store.engine.dispose()
    (tmp_path / "reports.db").unlink()
    (tmp_path / "reports.db").mkdir()  # the store cannot be opened any more
    time.sleep(0.1)
    assert cache.lookup(secret) == bearer.Principal("edge-1", bearer.Role.sink)
    store.dispose()
