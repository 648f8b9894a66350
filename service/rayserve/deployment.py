"""The service as a Ray Serve deployment: the same FastAPI app as ``wai-dispatch serve``
(:func:`~service.http.app.create_app`), each replica a full decoder on the shared set registry
and the shared report store, N replicas or autoscaled on ongoing requests (docs/ray.md).

:func:`build` is the application builder, for ``serve run``/``serve deploy`` (its import path
is :data:`IMPORT_PATH`; its arguments :class:`Plan`'s fields) and for ``wai-dispatch serve
--ray``, which hands Ray the same import path. Ray is imported inside the functions that need
it: importing this module costs no runtime.

Each replica loads its settings as any process of the service does
(:func:`~service.settings.load`: the ``WAI_*`` variables of the deployment's runtime
environment, or ``serve --ray``'s hand-over), then takes these of its own:

- ``replica_id``: ``ray-<Serve's replica id>``, so that each replica spools into a folder of
  its own on the shared spool volume; a replica Ray restarts gets a new id, and the folder the
  dead one left is adopted by a live replica (service/store/spool_volume.py);
- ``data_dir``: ``<data_dir>/ray-replicas/<replica_id>``, its own set cache (replicas on one
  node must not share one: a replica's sync drops from its cache a set another replica has
  put there and not yet published), removed when the replica stops, and by a later replica
  on the node when it was killed; ``spool_dir`` stays the shared ``<data_dir>/spool`` unless
  set;
- ``decode_threads`` and ``ort_threads``: the replica's CPUs (``replica_cpus``, rounded up),
  unless set;
- answers carry ``X-Replica: <replica_id>`` (:class:`ReplicaHeader`).

A replica takes requests once its lifespan has started the service *and* warmed its sets
(Ray Serve routes to a replica when its start-up returns; ``/readyz`` stays the service's
own). More than one replica on a SQLite store is refused (:class:`StoreNotShared`): a fleet
shares PostgreSQL."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wai_dispatch.service import settings as settings_mod
from wai_dispatch.service.http.app import create_app
from wai_dispatch.service.rayserve.plan import Plan, check_store, warn_unplaceable
from wai_dispatch.service.settings import Settings

log = logging.getLogger("wai_dispatch.rayserve")

#: The Serve application's name and its one deployment's.
APP_NAME = "wai-dispatch"
DEPLOYMENT = "WaiDispatch"
#: The application builder, as ``serve run`` and ``serve --ray`` name it.
IMPORT_PATH = "wai_dispatch.service.rayserve.deployment:build"
#: The answer header naming the replica that answered.
REPLICA_HEADER = "x-replica"
REPLICA_HEADER_BYTES = REPLICA_HEADER.encode("ascii")
#: The folder of ``data_dir`` holding each replica's own data directory (its set cache).
HOMES = "ray-replicas"
#: A replica's folder younger than this is never swept (its replica may be starting).
SWEEP_AFTER_S = 60.0

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def replica_id_of(unique_id: str) -> str:
    """A replica's spool folder name from Serve's replica id (``ray-<id>``)."""
    return "ray-" + (_UNSAFE.sub("_", unique_id).strip("._") or "replica")


class ReplicaHeader:
    """ASGI middleware: every answer carries ``X-Replica: <replica_id>``."""

    def __init__(self, app: ASGIApp, replica: str) -> None:
        self.app = app
        self.value = replica.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_replica(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (REPLICA_HEADER_BYTES, self.value),
                ]
            await send(message)

        await self.app(scope, receive, send_with_replica)


def replica_settings(unique_id: str, threads: int) -> Settings:
    """One replica's settings: the process's (environment or hand-over), its own replica id,
    its own data directory (:func:`claim_home`) beside the spool volume every replica shares,
    and its CPUs as decode and ONNX Runtime threads unless those were set."""
    base = settings_mod.load()
    replica = replica_id_of(unique_id)
    update: dict[str, Any] = {
        "replica_id": replica,
        "data_dir": base.data_dir / HOMES / replica,
        "spool_dir": base.spool_volume,
    }
    for name in ("ort_threads", "decode_threads"):
        if name not in base.model_fields_set:
            update[name] = threads
    (base.data_dir / HOMES / replica).mkdir(parents=True, exist_ok=True)
    return settings_mod.load(**update)


def claim_home(home: Path) -> int:
    """Hold ``home``'s owner lock (an exclusive ``flock`` on ``home/.owner``, kept while the
    replica runs: the descriptor returned) and remove the sibling folders no live replica
    holds: those of replicas that were killed (a replica that stops removes its own). A folder
    whose lock file is younger than :data:`SWEEP_AFTER_S` is left: its replica may be
    starting."""
    fd = os.open(home / ".owner", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    for other in sorted(p for p in home.parent.iterdir() if p.is_dir() and p != home):
        lock = other / ".owner"
        try:
            if time.time() - lock.stat().st_mtime < SWEEP_AFTER_S:
                continue
            theirs = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(theirs, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # alive
        finally:
            os.close(theirs)
        shutil.rmtree(other, ignore_errors=True)
    return fd


def replica_app(unique_id: str, threads: int) -> FastAPI:
    """The app one replica serves: ``create_app`` on :func:`replica_settings`, answering with
    :class:`ReplicaHeader`, its lifespan returning only once the sets are warm (so that Serve
    routes to it warm), its data directory removed when it stops. Its start is logged, with
    how long each part took (the service's start: the store and the sets fetched from the
    registry; the warming; the whole, from this call)."""
    t0 = time.perf_counter()
    chosen = replica_settings(unique_id, threads)
    app = create_app(chosen)
    app.add_middleware(ReplicaHeader, replica=str(chosen.replica_id))
    started = app.router.lifespan_context

    @asynccontextmanager
    async def warm_lifespan(app: FastAPI) -> AsyncIterator[None]:
        owner = claim_home(chosen.data_dir)
        try:
            t1 = time.perf_counter()
            async with started(app):  # create_app's lifespan: it keeps no lifespan state
                t2 = time.perf_counter()
                await anyio.to_thread.run_sync(app.state.service.warmup.done.wait)
                t3 = time.perf_counter()
                took = {
                    "start_s": round(t2 - t1, 2),
                    "warm_s": round(t3 - t2, 2),
                    "ready_s": round(t3 - t0, 2),
                    "sets": len(app.state.service.warmup.results),
                }
                log.info("replica ready", extra={"replica": chosen.replica_id, **took})
                yield
        finally:
            shutil.rmtree(chosen.data_dir, ignore_errors=True)
            os.close(owner)

    app.router.lifespan_context = warm_lifespan
    return app


def build(args: Mapping[str, Any] | None = None) -> Any:
    """The Serve application (``serve run wai_dispatch.service.rayserve.deployment:build``):
    one deployment, :data:`DEPLOYMENT`, of :class:`Plan` ``args`` (and ``env``: variables set in
    every replica, besides the application's runtime environment). Raises
    :class:`~service.rayserve.plan.PlanInvalid` and :class:`~service.rayserve.plan.
    StoreNotShared` (checked against this process's settings)."""
    from ray import serve  # the ray extra

    given = dict(args or {})
    env = {str(k): str(v) for k, v in dict(given.pop("env", None) or {}).items()}
    plan = Plan.from_args(given)
    check_store(settings_mod.load(), plan)
    warn_unplaceable(plan)  # `serve run`/`serve deploy`: Ray is connected when they build
    threads = plan.threads()
    options = plan.options()
    if env:  # the replicas' environment (serve --ray: its hand-over of the settings)
        options["ray_actor_options"]["runtime_env"] = {"env_vars": env}

    class WaiDispatch:
        """One replica: the service's app, built when Serve starts the replica."""

        def __serve_build_asgi_app__(self) -> FastAPI:
            context = serve.get_replica_context()
            return replica_app(context.replica_id.unique_id, threads)

    ingress = serve.ingress()(WaiDispatch)
    deployment = serve.deployment(name=DEPLOYMENT, **options)(ingress)
    return deployment.bind()
