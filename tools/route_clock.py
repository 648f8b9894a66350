"""The instrumented server child of ``bench service --route`` (tools/bench_service.py): the
service's app on uvicorn with ``perf_counter_ns`` timers around the functions a decode runs
through, and each thread's CPU time; the one module outside the HTTP layer that imports its modules
(tests/project/test_architecture.py names it)."""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.dependencies import utils as fastapi_deps

from wai_dispatch.cli.serve import PROTOCOLS
from wai_dispatch.codec import envelope
from wai_dispatch.service import settings as settings_mod
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import DecodeResult
from wai_dispatch.service.http import admission
from wai_dispatch.service.http.app import create_app
from wai_dispatch.service.http.metrics import Metrics
from wai_dispatch.service.http.routes import decode as route
from wai_dispatch.service.store.bearer import TokenCache
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.usecase import decode as usecase


class _Clock:
    """Nanoseconds per step, summed, and how many times each ran (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ns: dict[str, int] = defaultdict(int)
        self.n: dict[str, int] = defaultdict(int)

    def add(self, step: str, ns: int) -> None:
        with self.lock:
            self.ns[step] += ns
            self.n[step] += 1

    def clear(self) -> None:
        with self.lock:
            self.ns.clear()
            self.n.clear()


def _timed(clock: _Clock, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            clock.add(step, time.perf_counter_ns() - t)

    return wrapper


def _timed_async(clock: _Clock, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter_ns()
        try:
            return await fn(*args, **kwargs)
        finally:
            clock.add(step, time.perf_counter_ns() - t)

    return wrapper


def _instrument(clock: _Clock) -> None:
    """Put the timers around the steps (bench_service's STEPS)."""

    def wrap(owner: Any, name: str, step: str, timer: Any = _timed) -> None:
        setattr(owner, name, timer(clock, step, getattr(owner, name)))

    wrap(route, "read_body", "body read", _timed_async)
    wrap(route, "_decoded", "answer (base64, JSON)")
    wrap(TokenCache, "lookup", "bearer token")
    wrap(envelope, "parse_json", "parse JSON envelope")
    prepare = usecase.prepare

    def prepared(*args: Any) -> Any:
        t, before = time.perf_counter_ns(), clock.ns["parse JSON envelope"]
        try:
            return prepare(*args)
        finally:  # less the parse, timed on its own (the other request may parse meanwhile)
            took = time.perf_counter_ns() - t - (clock.ns["parse JSON envelope"] - before)
            clock.add("prepare (headers, set, estimate)", max(0, took))

    setattr(usecase, "prepare", prepared)  # noqa: B010
    wrap(Decoder, "decode", "decode")
    wrap(usecase, "records_for", "records made")
    begin = Recorder.begin

    def begun(self: Any, records: Any) -> Callable[[], Any]:
        t = time.perf_counter_ns()
        wait = begin(self, records)
        clock.add("recording: handing over", time.perf_counter_ns() - t)
        return _timed(clock, "recording: wait for the commit, after the PNG", wait)

    setattr(Recorder, "begin", begun)  # noqa: B010
    wrap(ReportStore, "record", "(the commit itself, in the committer's thread)")
    wrap(fastapi_deps, "run_in_threadpool", "sync dependencies (each a thread hop)", _timed_async)
    wrap(DecodeResult, "png", "PNG")
    wrap(Metrics, "decode_done", "metrics")
    handle = logging.Logger.handle

    def handled(self: logging.Logger, record: logging.LogRecord) -> None:
        if not self.name.startswith("wai_dispatch"):
            return handle(self, record)
        t = time.perf_counter_ns()
        try:
            return handle(self, record)
        finally:
            clock.add("log lines", time.perf_counter_ns() - t)

    setattr(logging.Logger, "handle", handled)  # noqa: B010
    run = admission.Admission.run

    async def admitted(self: Any, est: Any, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter_ns()
        inside = [0]

        def work() -> Any:
            start = time.perf_counter_ns()
            clock.add("admission: checks, wait for a worker", start - t)
            try:
                return fn()
            finally:
                inside[0] = time.perf_counter_ns() - t

        try:
            return await run(self, est, work)
        finally:
            clock.add(
                "admission: hand-back to the event loop", time.perf_counter_ns() - t - inside[0]
            )

    setattr(admission.Admission, "run", admitted)  # noqa: B010


def _threads_cpu() -> dict[str, float]:
    """CPU seconds (user and system) so far by thread, summed by Python name less its number
    (``decode_0`` and ``decode_1``: ``decode``); a thread Python did not start (ONNX Runtime's
    pool) is :data:`NATIVE`."""
    names = {
        str(t.native_id): t.name.rstrip("0123456789").rstrip("_-") for t in threading.enumerate()
    }
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = defaultdict(float)
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        used[names.get(task.name, NATIVE)] += (int(fields[11]) + int(fields[12])) / tick
    return used


#: The threads Python did not start: ONNX Runtime's intra-op pool.
NATIVE = "(native: ONNX Runtime's pool)"


def serve(data_dir: Path, port: int, out: Path) -> None:
    """The child: the instrumented app on uvicorn; SIGUSR1 clears the clock, SIGUSR2 writes it
    to ``out`` (uvicorn stops on SIGTERM and raises it again, so the clock is asked first)."""
    import uvicorn  # lazy: a server's

    clock = _Clock()
    _instrument(clock)
    chosen = settings_mod.load(data_dir=data_dir, queue=64)
    app = create_app(chosen)

    async def timed_app(scope: Any, receive: Any, send: Any) -> None:
        t = time.perf_counter_ns()
        try:
            await app(scope, receive, send)
        finally:
            if scope["type"] == "http" and scope["path"] == "/v1/decode":
                clock.add("app", time.perf_counter_ns() - t)

    cpu = {"from": _threads_cpu()}

    def cleared(*_: Any) -> None:
        clock.clear()
        cpu["from"] = _threads_cpu()

    def written(*_: Any) -> None:
        now = _threads_cpu()
        used = {name: now[name] - cpu["from"].get(name, 0.0) for name in now}
        out.write_text(json.dumps({"ns": clock.ns, "n": clock.n, "cpu_s": used}))

    signal.signal(signal.SIGUSR1, cleared)
    signal.signal(signal.SIGUSR2, written)
    server = uvicorn.Server(
        uvicorn.Config(
            timed_app,
            host="127.0.0.1",
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            http=PROTOCOLS[chosen.http_parser],  # as `serve` runs
            loop=chosen.loop_impl,
        )
    )
    server.run()


if __name__ == "__main__":  # DATA PORT OUT
    serve(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
