"""``python -m wai_dispatch.tools.trace_route``: the modules of ours one ``POST /v1/decode`` runs
through, and how often the call chain changes package (a layer of docs/architecture.md), traced
with :func:`sys.setprofile` in every thread after one warm-up decode of the 256×256 sample.

A thread counts when it ran the HTTP layer or was handed work while the request ran (a
``Condition.wait`` ended by a signal, or a pool's work item) and then ran a module of ours; the
threads woken only by their own timers (metrics sampler, set sync, pruner, spool replay) are
left out."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import thread as pool_thread
from pathlib import Path
from types import FrameType
from typing import Any

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.settings import load
from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools._service import serve
from wai_dispatch.tools.harness import decode_headers, free_port

PREFIX = "wai_dispatch."
DECODER = "wai_dispatch.service.decoding.decoder"
SAMPLE = envelopes_dir() / "bmshj2018-demo-q3.json"


def package_of(module: str) -> str:
    """The package (layer) of one of our modules: ``service.http`` for
    ``wai_dispatch.service.http.routes.decode``, ``codec`` for ``wai_dispatch.codec.sets.store``."""
    parts = module[len(PREFIX) :].split(".")
    return ".".join(parts[:2]) if parts[0] == "service" and len(parts) > 1 else parts[0]


#: A generator's or a coroutine's code (CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE,
#: CO_ASYNC_GENERATOR): each resume of its frame is a profiler "call" too.
_RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200
#: A wait that returns True was ended by another thread's signal (False: by its timeout).
_WAIT = threading.Condition.wait.__code__
#: A pool's worker runs a work item someone submitted.
_WORK_ITEM = pool_thread._WorkItem.run.__code__


class Trace:
    """The calls of ours, per thread, while :attr:`on` is set. A generator or a coroutine
    counts once, when it first runs: resuming one after an ``await`` or a ``yield`` is no
    call."""

    def __init__(self) -> None:
        self.on = False
        self.calls: dict[int, list[tuple[str, str]]] = {}
        self.names: dict[int, str] = {}
        #: The threads handed work while :attr:`on` was set.
        self.handed: set[int] = set()
        self._started: dict[int, FrameType] = {}  # the frames kept, so their ids stay theirs

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on:
            return
        if event == "return" and frame.f_code is _WAIT and arg is True:
            self.handed.add(threading.get_ident())
        if event != "call":
            return
        if frame.f_code is _WORK_ITEM:
            self.handed.add(threading.get_ident())
        if frame.f_code.co_flags & _RESUMABLE:
            if id(frame) in self._started:
                return
            self._started[id(frame)] = frame
        module = frame.f_globals.get("__name__", "")
        if isinstance(module, str) and module.startswith(PREFIX):
            key = threading.get_ident()
            if key not in self.calls:
                self.names[key] = threading.current_thread().name
            self.calls.setdefault(key, []).append((module, frame.f_code.co_name))

    def figures(self) -> dict[str, Any]:
        request = {
            key: calls
            for key, calls in self.calls.items()
            if key in self.handed or any(package_of(m) == "service.http" for m, _ in calls)
        }
        modules = sorted({m for calls in request.values() for m, _ in calls})
        changes = {key: _changes([m for m, _ in calls]) for key, calls in request.items()}
        decode = [k for k, calls in request.items() if (DECODER, "decode") in calls]
        returns = sum(_returns_to_http([m for m, _ in calls]) for calls in request.values())
        return {
            "modules": len(modules),
            "package_changes": sum(changes.values()),
            "package_changes_in_decode_thread": sum(changes[k] for k in decode),
            "returns_to_http": returns,
            "threads": len(request),
            "thread_names": sorted(self.names[k] for k in request),
            "background_threads": sorted(self.names[k] for k in self.calls if k not in request),
            "module_names": modules,
        }


def _returns_to_http(modules: list[str]) -> int:
    """How often a thread's calls come back to the HTTP layer after leaving it."""
    http = [package_of(m) == "service.http" for m in modules]
    return sum(1 for a, b in itertools.pairwise(http) if b and not a)


def _changes(modules: list[str]) -> int:
    packages = [package_of(m) for m in modules]
    return sum(1 for a, b in itertools.pairwise(packages) if a != b)


def trace_one_decode(data_dir: Path) -> dict[str, Any]:
    """Start the service on ``data_dir``, decode the sample once untraced and once traced."""
    import httpx  # lazy: the HTTP client, only for the tools that call a service

    settings = load(
        data_dir=data_dir, host="127.0.0.1", port=free_port(), warm=False, log_level="error"
    )
    store = ReportStore(settings.url)
    store.migrate()
    token = bearer.create(store, "trace", bearer.Role.sink)
    store.dispose()
    body = SAMPLE.read_bytes()
    trace = Trace()
    threading.setprofile(trace)
    sys.setprofile(trace)
    try:
        with serve(settings) as url:
            headers = decode_headers(token)
            with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
                client.post("/v1/decode", content=body).raise_for_status()  # warm
                trace.on = True
                answer = client.post("/v1/decode", content=body)
                trace.on = False
                answer.raise_for_status()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    # the client's own thread is ours too: keep only the server's threads
    trace.calls.pop(threading.get_ident(), None)
    return trace.figures()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.trace_route")
    parser.add_argument("--modules", action="store_true", help="list the modules visited")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = trace_one_decode(Path(tmp) / "data")
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"modules of ours visited: {figures['modules']}")
    changes, in_decode = figures["package_changes"], figures["package_changes_in_decode_thread"]
    print(
        f"package changes: {changes} in the request's {figures['threads']} threads, "
        f"{in_decode} of them in the decode thread"
    )
    print(f"the request's threads: {', '.join(figures['thread_names'])}")
    print(f"returns to the HTTP layer: {figures['returns_to_http']}")
    if args.modules:
        for name in figures["module_names"]:
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
