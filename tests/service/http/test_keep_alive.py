"""Issue 36, item 6: no request dropped on a healthy server. At 64 clients about 0.3% of
requests failed with ``ReadError`` and never reached the app: the server closed connections
idle for ``keep_alive_s`` (5 s, as long as httpx's pool keeps one), and a request a pooled
client sent on one as it closed was reset. The server now keeps an idle connection longer
than common client pools do (75 s; httpx 5 s, aiohttp 15 s), so the client closes it first.

The load test runs ``serve``'s uvicorn settings (the keep-alive and the read deadlines'
protocol): 64 tasks through one pooled httpx client, each a burst of requests and then an idle
gap at the pool's expiry, where the race was; every request must be answered."""

from __future__ import annotations

import asyncio
import importlib.util
import random
import threading
import time
from pathlib import Path

import httpx
import pytest
from _svc import _prepared, free_port

from wai_dispatch.cli.serve import PROTOCOLS
from wai_dispatch.service.settings import Settings, load

pytestmark = pytest.mark.slow

#: httpx's default pool expiry, and the longest common one (aiohttp's).
CLIENT_POOL_EXPIRY_S = {"httpx": 5.0, "aiohttp": 15.0}
TASKS, ROUNDS, BURST = 64, 4, 10


def test_the_server_keeps_an_idle_connection_longer_than_client_pools() -> None:
    default = Settings.model_fields["keep_alive_s"].default
    assert default > max(CLIENT_POOL_EXPIRY_S.values())


@pytest.mark.parametrize(
    "parser",
    [
        "h11",
        pytest.param(
            "httptools",
            marks=pytest.mark.skipif(
                importlib.util.find_spec("httptools") is None, reason="httptools is not installed"
            ),
        ),
    ],
)
def test_a_pooled_client_sees_no_transport_error(tmp_path: Path, parser: str) -> None:
    import uvicorn

    port = free_port()
    app, _ = _prepared(tmp_path / "data", port)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, access_log=False,
        http=PROTOCOLS[parser],  # serve's, on each parser
        timeout_keep_alive=load(data_dir=tmp_path / "data").keep_alive_s,  # serve's
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        answered, failed = asyncio.run(_load(f"http://127.0.0.1:{port}"))
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    assert failed == [] and answered == TASKS * ROUNDS * BURST


async def _load(url: str) -> tuple[int, list[str]]:
    expiry = CLIENT_POOL_EXPIRY_S["httpx"]
    limits = httpx.Limits(max_connections=TASKS, max_keepalive_connections=TASKS,
                          keepalive_expiry=expiry)  # fmt: skip
    answered, failed = 0, []
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def task() -> None:
            nonlocal answered
            for _ in range(ROUNDS):
                for _ in range(BURST):
                    try:
                        r = await client.get("/healthz")
                    except httpx.TransportError as exc:
                        failed.append(f"{type(exc).__name__}: {exc}")
                        continue
                    answered += r.status_code == 200
                # idle for about the pool's expiry: the connection is reused, or dropped by
                # the client, right where a server closing at the same age races it
                await asyncio.sleep(random.uniform(expiry - 0.05, expiry + 0.01))

        await asyncio.gather(*(task() for _ in range(TASKS)))
    return answered, failed
