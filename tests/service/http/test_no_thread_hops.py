"""``POST /v1/decode`` hands no dependency to a thread: FastAPI runs a plain ``def``
dependency in its thread pool, a hop per dependency per request that, beside two decodes on
two cores, cost a request 36 ms (four hops; docs/performance.md's route profile). The app's
dependencies (the request's text checked, the service's parts, the bearer token) are ``async``;
the token's lookup goes to a thread only when it may read the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _svc import SAMPLE_JSON, in_process
from fastapi.dependencies import utils as fastapi_deps


def test_a_decode_takes_no_thread_hop_for_its_dependencies(
    tmp_path: Path, monkeypatch: Any
) -> None:
    hops: list[str] = []
    hop = fastapi_deps.run_in_threadpool

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__qualname__", repr(fn)))
        return await hop(fn, *args, **kwargs)

    monkeypatch.setattr(fastapi_deps, "run_in_threadpool", counted)
    with in_process(tmp_path / "data") as live, live.client() as sink:
        body = SAMPLE_JSON.read_bytes()
        for _ in range(2):
            r = sink.post("/v1/decode", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 200, r.text
    assert hops == [], f"dependencies run in a thread: {hops}"


def test_a_token_not_in_the_view_is_looked_up_in_a_thread(tmp_path: Path, monkeypatch: Any) -> None:
    """The lookup that may read the store (a token not in the view, created since it was
    read) is handed to a thread, never made on the event loop; one in the view is not."""
    from wai_dispatch.service.http import deps
    from wai_dispatch.service.store import bearer

    looked: list[Any] = []
    hop = deps.run_in_threadpool

    async def counted(fn: Any, *args: Any) -> Any:
        looked.append(args)
        return await hop(fn, *args)

    monkeypatch.setattr(deps, "run_in_threadpool", counted)
    with in_process(tmp_path / "data") as live:
        cache = live.service.tokens
        made = bearer.create(live.service.report_store, "late-sink", bearer.Role.sink)
        assert cache.needs_store(made) and not cache.needs_store(live.tokens["sink"])
        live.tokens["late"] = made
        for role in ("sink", "late"):
            with live.client(role) as c:
                c.get("/v1/reports")
    assert looked == [(made,)]
