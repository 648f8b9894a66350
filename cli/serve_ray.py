"""``wai-dispatch serve --ray ADDRESS [--replicas N | --autoscale MIN:MAX]``: the service
deployed on a Ray cluster as a Ray Serve application (docs/ray.md). As ``serve`` hands uvicorn
the app as an import string, this hands Ray Serve the application builder's
(``wai_dispatch.service.rayserve.deployment:build``, the path a ``serve run`` config names),
with this command's effective settings handed over to every replica. Ray (the ``ray`` extra)
is imported when the command runs; without it the command says how to install it (exit 2)."""

from __future__ import annotations

import argparse
import importlib
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from wai_dispatch.cli.errors import RayMissing, RayUnreachable, UsageError
from wai_dispatch.service.settings import HANDOVER_ENV, Settings, handed_over

#: The application builder (service/rayserve/deployment.py), as ``serve run`` names it.
IMPORT_PATH = "wai_dispatch.service.rayserve.deployment:build"
APP_NAME = "wai-dispatch"
INSTALL = "pip install 'wai-dispatch[ray]'"


def plan_args(args: argparse.Namespace) -> dict[str, Any]:
    """The builder's arguments from the command's flags (those given)."""
    names = ("replicas", "autoscale", "replica_cpus")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """Raise ``ray_unreachable`` unless something answers at ``HOST:PORT`` (``auto`` and a
    ``ray://`` address are left to Ray)."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(
            f"--ray {address!r}: HOST:PORT of the cluster's head (its GCS), ray://HOST:PORT or auto"
        )
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RayUnreachable(
            f"no Ray cluster answers at {address}: {exc.strerror or exc}"
        ) from None


def _ray() -> Any:
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise RayMissing(f"serve --ray needs the ray extra: {INSTALL} ({exc})") from None
    return ray, serve


def _builder() -> Any:
    module, function = IMPORT_PATH.split(":")
    return getattr(importlib.import_module(module), function)


def deploy(
    address: str,
    chosen: Settings,
    args: dict[str, Any],
    env: dict[str, str],
    before: Callable[[], None] = lambda: None,
) -> Any:
    """Build the application (its plan and store checked, no cluster needed), call
    ``before`` (``serve``'s banner: the store migrated once, the admin token ensured), connect
    to ``address``, start Serve's HTTP proxy on the settings' host and port and run the
    application until its replicas answer; its handle. The application is built again once
    connected, where the builder checks the plan against the cluster's CPUs (a warning logged
    when they cannot place its most replicas: service/rayserve/plan.py)."""
    ray, serve = _ray()
    build = _builder()
    build({**args, "env": env})  # refused here, before anything is touched
    reachable(address)
    before()
    try:
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        application = build({**args, "env": env})
        serve.start(http_options={"host": chosen.host, "port": chosen.port})
        return serve.run(application, name=APP_NAME, route_prefix="/", blocking=False)
    except (ConnectionError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RayUnreachable(f"the Ray cluster at {address}: {first}") from None


def run_ray(
    args: argparse.Namespace, chosen: Settings, banner: Callable[[Settings], list[str]]
) -> int:
    """Deploy on ``args.ray``; with ``--detach`` return once the replicas answer, else serve
    until interrupted (Ctrl-C, SIGTERM), then delete the application."""
    ray, serve = _ray()
    lines: list[str] = []
    env = {HANDOVER_ENV: chosen.model_dump_json()}  # every replica's settings: these
    with handed_over(chosen):  # the builder checks the plan against them, as Ray will
        deploy(args.ray, chosen, plan_args(args), env, lambda: lines.extend(banner(chosen)))
    print("\n".join(lines), flush=True)
    if args.detach:
        print(
            f"deployed on Ray ({args.ray}) as the Serve application {APP_NAME!r}; "
            f"`serve status`, `serve shutdown`",
            flush=True,
        )
        ray.shutdown()
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    finally:
        serve.delete(APP_NAME)
        ray.shutdown()
    return 0
