"""The HTTP service on a loopback port, in a thread of this process, for the tools that drive a
running service (``bench_dashboard``, ``verify_page``). Like ``wai-dispatch serve`` it hands
uvicorn the application as an import string, so no tool imports the service's HTTP modules."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from wai_dispatch.cli.serve import PROTOCOLS
from wai_dispatch.service.settings import Settings, handed_over

APP = "wai_dispatch.service.http.app:create_app"


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """Run the service on ``settings`` (their host and port) until the block ends; yields its
    base URL (``http://host:port``)."""
    import uvicorn  # lazy: only the tools that start a service need the server

    config = uvicorn.Config(
        APP,
        factory=True,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        http=PROTOCOLS[settings.http_parser],  # the parser and loop `serve` runs on
        loop=settings.loop_impl,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    # the factory's settings.load() reads exactly these, as the app starts; this process's own
    # settings are as they were once it has
    with handed_over(settings):
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
    try:
        yield f"http://{settings.host}:{settings.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
