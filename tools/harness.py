"""The benchmarks' one harness: the command line and its common options, timing (best of N,
variants taking turns so that other load falls on each alike; threads for a span), a function
run in a fresh process (:func:`fresh`), memory, tables, a ``wai-dispatch serve`` to drive, a
database for the run, and the float32 GEMM rate anchor. The driver (tools/bench.py) prints the
load average before and after each bench.

    python -m wai_dispatch.tools.harness MODULE:FUNCTION '[ARGS…]'   # what fresh() runs"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np
from sqlalchemy import create_engine, text

BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: The PostgreSQL the store benchmarks use when it answers and none is named.
LOCAL_PG = "postgresql://postgres@127.0.0.1:5432/test"
SERVE = ("-m", "wai_dispatch", "serve")


def parser(
    name: str,
    doc: str | None = None,
    *,
    threads: int | None = None,
    repeats: int | None = None,
    quick: str | None = None,
) -> argparse.ArgumentParser:
    """The command line of the benchmark ``name`` (``bench NAME --help`` prints it), with the
    common options given a default (``quick``: what ``--quick``, the smoke run, does)."""
    about = doc.split("\n\n")[0] if doc else None
    p = argparse.ArgumentParser(
        prog=f"python -m wai_dispatch.tools.bench {name}", description=about
    )
    if threads is not None:
        p.add_argument("--threads", type=int, default=threads, help=f"threads ({threads})")
    if repeats is not None:
        p.add_argument("--repeats", type=int, default=repeats, help=f"best of N ({repeats})")
    if quick is not None:
        p.add_argument("--quick", action="store_true", help=quick)
    return p


def missing(name: str, module: str, what: str) -> bool:
    """Whether ``module`` is not installed; if so, says the bench ``name`` skipped."""
    if importlib.util.find_spec(module) is not None:
        return False
    print(f"{name}: skipped ({what} is not installed)")
    return True


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def table(
    head: Sequence[str], rows: Iterable[Sequence[object]], formats: str = "", indent: str = ""
) -> None:
    """``rows`` under ``head``, each column as wide as its widest cell: the first to the left,
    the others to the right; ``formats``, one spec a column separated by spaces (``-``: none),
    formats the cells that are not strings."""
    specs = [f.strip("-") for f in formats.split()] + [""] * len(head)
    cells = [list(head)]
    for row in rows:
        cells.append(
            [c if isinstance(c, str) else format(c, f) for c, f in zip(row, specs, strict=False)]
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    for row in cells:
        line = [c.rjust(w) for c, w in zip(row, widths, strict=True)]
        line[0] = row[0].ljust(widths[0])
        print(indent + "  ".join(line).rstrip(), flush=True)


def loadavg() -> str:
    """``/proc/loadavg``'s 1, 5 and 15-minute load averages, and the CPU count."""
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"load average {load} on {os.cpu_count()} CPUs"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latencies(seconds: Sequence[float]) -> dict[str, float]:
    """The median, 99th-percentile and mean of ``seconds``, in ms."""
    ms = [t * 1e3 for t in seconds] or [0.0]
    return {
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "mean_ms": sum(ms) / len(ms),
    }


def memory_kib(pid: int | str = "self") -> dict[str, int]:
    """A process's resident memory now (``VmRSS``) and at its peak (``VmHWM``), in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def for_seconds(
    work: Callable[[int, Callable[[], object], threading.Event], object], count: int, seconds: float
) -> float:
    """``work(k, go, stop)`` in ``count`` threads: each readies itself, calls ``go()`` to wait
    for the others, and runs until ``stop`` is set, ``seconds`` after they are all released;
    the seconds from the release to the last one's end."""
    start = threading.Barrier(count + 1)
    stop = threading.Event()

    def run(k: int) -> None:
        try:
            work(k, start.wait, stop)
        except BaseException:
            start.abort()  # the release fails rather than waits for a thread that is gone
            raise

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(count)]
    for thread in threads:
        thread.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return time.perf_counter() - t0


def in_threads(count: int, work: Callable[[], object]) -> float:
    """``work()`` in ``count`` threads at once; the seconds until the last one returns."""
    threads = [threading.Thread(target=work) for _ in range(count)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def decode_headers(token: str, **more: str) -> dict[str, str]:
    """A decode's request headers: the bearer token, a JSON envelope, and ``more``."""
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **more}


class Served(NamedTuple):
    proc: subprocess.Popen[bytes]
    url: str
    token: str  # the admin token the service wrote at its start


@contextmanager
def service(
    data_dir: Path,
    env: Mapping[str, str] | None = None,
    *,
    argv: Sequence[str] = SERVE,
    port: int | None = None,
    log: IO[str] | int = subprocess.DEVNULL,
) -> Iterator[Served]:
    """``wai-dispatch serve`` (or ``python argv…``) on ``data_dir`` and a loopback port, on the
    default settings (no ``WAI_*`` of this process's) and ``env``, until the block ends; yields
    once it is :func:`ready`."""
    port = port or free_port()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("WAI_")}
    env = {**inherited, "WAI_DATA_DIR": str(data_dir), "WAI_PORT": str(port)} | {
        "WAI_LOG_LEVEL": "WARNING",
        **(env or {}),
    }
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or ready(url), 120, "the service's /readyz")
        if proc.poll() is not None:
            raise RuntimeError(f"the service did not become ready (exit {proc.poll()})")
        yield Served(proc, url, (data_dir / "admin-token").read_text().strip())
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def wait_until(
    done: Callable[[], object], timeout_s: float, what: str, every: float = 0.05
) -> None:
    """Poll ``done()`` every ``every`` seconds until it is true; :class:`TimeoutError` (naming
    ``what``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:g} s")
        time.sleep(every)


def ready(url: str) -> bool:
    """Whether the service at ``url`` answers ``/readyz`` with 200."""
    import httpx  # lazy: only the benchmarks that drive a service need the client

    try:
        return httpx.get(f"{url}/readyz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def database(admin_url: str | None, folder: Path) -> Iterator[str]:
    """A store for the run: SQLite in ``folder``, or (``admin_url``) a PostgreSQL database
    created for it and dropped after."""
    if admin_url is None:
        yield f"sqlite:///{folder / 'reports.db'}"
        return
    url = admin_url.replace("postgresql://", "postgresql+psycopg://", 1)
    name = f"wai_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def postgres_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--postgres", metavar="ADMIN_URL", help=f"default {LOCAL_PG} if it answers")
    p.add_argument("--no-postgres", action="store_true", help="SQLite only")


def postgres(args: argparse.Namespace) -> str | None:
    """The PostgreSQL admin URL to measure on (:func:`postgres_options`): the one named, else
    the local server when it answers; ``None`` (said so) for none."""
    if args.no_postgres:
        return None
    if args.postgres:
        return str(args.postgres)
    host, _, port = LOCAL_PG.split("@", 1)[-1].split("/", 1)[0].partition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return LOCAL_PG
    except OSError:
        print(f"postgresql: nothing answers at {LOCAL_PG}; not measured")
        return None


def timings(fn: Callable[[], object], repeats: int) -> list[float]:
    """The seconds of each of ``repeats`` calls of ``fn``, in order (no warm-up)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def first_and_best(fn: Callable[[], object], repeats: int) -> dict[str, float | None]:
    """The first call's seconds (a cold start: loading, building) and the best of ``repeats``
    more (``None`` for none)."""
    times = timings(fn, 1 + repeats)
    return {"first": times[0], "then": min(times[1:], default=None)}


def best_of(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    return min(timings(fn, repeats))


def best_of_interleaved(fns: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best of ``repeats`` for each function, taking turns, so that load from other processes
    on a shared machine falls on every variant alike."""
    for fn in fns.values():
        fn()  # warm-up
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def kernel_times(
    model: bytes, so: Any, feeds: Mapping[str, Any], runs: int
) -> list[tuple[str, str, float]]:
    """ONNX Runtime's own profile of ``runs`` runs of ``model`` on the CPU (session options
    ``so``, profiling turned on here): each node's kernel time in each run, as (node, operator
    type, microseconds)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(tmp) / "profile")
        session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        for _ in range(runs):
            session.run(None, dict(feeds))
        events = json.loads(Path(session.end_profiling()).read_text())
    return [
        (e["name"], e["args"]["op_name"], float(e["dur"]))
        for e in events
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")
    ]


def gemm_worker(threads: int, repeats: int, n: int = 2048) -> dict[str, Any]:
    """This process's float32 GEMM rate (n × n), on ``threads`` BLAS threads where
    threadpoolctl can set them; and the BLAS it ran on."""
    info: list[dict[str, Any]] = []
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        limits: Any = None
    else:
        limits = threadpool_limits(limits=threads)
        info = threadpool_info()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    t = best_of(lambda: a @ b, repeats)
    if limits is not None:
        limits.restore_original_limits()
    blas = [
        {k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
        for i in info
        if i.get("user_api") == "blas"
    ]
    return {"gflops": 2 * n**3 / t / 1e9, "seconds": t, "blas": blas}


def gemm_rate(threads: int, repeats: int, *, clean_env: bool) -> dict[str, Any]:
    """The float32 GEMM rate in a fresh process; ``clean_env`` unsets OPENBLAS_CORETYPE and
    OPENBLAS_L2_SIZE for that command only (``env -u``)."""
    env = {k: v for k, v in os.environ.items() if not (clean_env and k in BLAS_ENV)}
    return fresh(gemm_worker, threads, repeats, env=env)


def worker_argv(worker: Callable[..., object], *args: Any) -> list[str]:
    """The command that calls ``worker(*args)`` (arguments and answer in JSON) in a fresh
    interpreter: this module's :func:`main`."""
    module = sys.modules[worker.__module__]
    name = module.__spec__.name if module.__spec__ else worker.__module__  # also as __main__
    target = f"{name}:{worker.__qualname__}"
    return [sys.executable, "-m", "wai_dispatch.tools.harness", target, json.dumps(args)]


def fresh(
    worker: Callable[..., object], *args: Any, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``worker(*args)`` in a fresh process (its own thread pools and memory high-water mark):
    the JSON object it returned."""
    out = subprocess.run(worker_argv(worker, *args), env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{worker.__qualname__}{args} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    target, args = argv if argv is not None else sys.argv[1:]
    module, _, name = target.partition(":")
    print(json.dumps(getattr(importlib.import_module(module), name)(*json.loads(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
