"""``python -m wai_dispatch.tools.bench_service``: HTTP decodes per second of the 256×256 sample
at concurrency 1, 2 and 8 against a real ``wai-dispatch serve``, beside the same decodes in
this process (the anchor; goal at concurrency 2 ≥ 95%); p50/p99 latency; the server's memory;
CBOR vs JSON and raw PNG vs base64 per request; a decode's peak memory by picture size.

``--route``: instead, where one ``POST /v1/decode``'s time goes, step by step (:data:`STEPS`;
docs/performance.md names the function each times), in a server child (tools/route_clock.py)
driven at ``--concurrency``, beside the anchor: the same decodes and PNGs from as many threads
in this process."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from wai_dispatch.codec.envelope import parse, parse_cbor, parse_json
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.tools import bench_tiles
from wai_dispatch.tools.harness import (
    best_of,
    decode_headers,
    free_port,
    in_threads,
    latencies,
    loadavg,
    memory_kib,
    met,
    parser,
    service,
    table,
    wait_until,
)

#: The service's settings here (beside the defaults): a queue that takes concurrency 8.
QUEUE = {"WAI_QUEUE": "64"}
SAMPLE = envelopes_dir() / "bmshj2018-demo-q3.json"
#: ``--route``: the steps in the order a request meets them (the module's doc).
STEPS = (
    "body read",
    "sync dependencies (each a thread hop)",
    "bearer token",
    "parse JSON envelope",
    "prepare (headers, set, estimate)",
    "admission: checks, wait for a worker",
    "decode",
    "records made",
    "recording: handing over",
    "PNG",
    "recording: wait for the commit, after the PNG",
    "admission: hand-back to the event loop",
    "log lines",
    "metrics",
    "answer (base64, JSON)",
)


def threads_cpu(pid: int) -> dict[int, float]:
    """Each live thread's CPU seconds so far, by thread id: the scheduler's nanoseconds
    (``schedstat``), where ``/proc/PID/stat`` counts 10 ms clock ticks, more than a request's
    few milliseconds on the event loop."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0]) / 1e9
    return out


def cpu_s(pid: int | None = None, since: dict[int, float] | None = None) -> tuple[float, float]:
    """The CPU seconds (user and system) of a process's threads (this one's: ``None``, all of
    them, ``process_time``), and of its first thread (the service's: the event loop, uvicorn,
    FastAPI and the route's own Python), from :func:`threads_cpu` read at ``since`` (the
    threads that ended in between are not counted: the service's live on)."""
    if pid is None:
        return time.process_time(), 0.0
    now, since = threads_cpu(pid), since or {}
    return sum(s - since.get(tid, 0.0) for tid, s in now.items()), now[pid] - since.get(pid, 0.0)


def in_process(decoder: Any, body: bytes, n: int, threads: int = 1) -> dict[str, float]:
    """Parse, decode and PNG-encode the envelope ``n`` times in this process: in a loop, or
    from ``threads`` threads at once (the service's decode pool without HTTP); the rate, the
    latencies, the decode's and the PNG's mean ms, and the CPU ms a decode (this process's)."""

    times: list[float] = []
    pngs: list[float] = []

    def one(_: int) -> None:
        t = time.perf_counter()
        result = decoder.decode(parse(body))
        t2 = time.perf_counter()
        result.png()
        times.append(time.perf_counter() - t)
        pngs.append(time.perf_counter() - t2)

    start, cpu = time.perf_counter(), cpu_s()[0]
    if threads == 1:
        for i in range(n):
            one(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(n)))
    total = time.perf_counter() - start
    return {
        "per_s": n / total,
        **latencies(times),
        "decode_ms": (sum(times) - sum(pngs)) / n * 1e3,
        "png_ms": sum(pngs) / n * 1e3,
        "cpu_ms": (cpu_s()[0] - cpu) / n * 1e3,
    }


def over_http(
    url: str, token: str, body: bytes, n: int, concurrency: int, pid: int | None = None
) -> Any:
    """``n`` decodes of the JSON envelope ``body`` from ``concurrency`` clients, JSON answers;
    with the server's ``pid``, the CPU ms a request of the server, of its event loop, and of
    the clients (this process's).

    Each client is one kept-alive ``http.client`` connection, as a sink's SDK holds one: the
    clients share the server's cores, so their CPU counts against the ratio (2026-12-08, load
    7–11: httpx's 4.6 ms a request against the h11 server, ``http.client``'s 2.5 there and 0.7
    against httptools; docs/performance.md)."""
    host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
    headers = decode_headers(token, Accept="application/json")
    times: list[float] = []
    statuses: list[int] = []
    lock = threading.Lock()
    per_worker = max(1, n // concurrency)

    def worker() -> None:
        conn = http.client.HTTPConnection(host or "127.0.0.1", port, timeout=120)
        try:
            for _ in range(per_worker):
                t = time.perf_counter()
                conn.request("POST", "/v1/decode", body, headers)
                answer = conn.getresponse()
                answer.read()
                with lock:
                    times.append(time.perf_counter() - t)
                    statuses.append(answer.status)
        finally:
            conn.close()

    before, client = threads_cpu(pid) if pid else {}, cpu_s()[0]
    total = in_threads(concurrency, worker)
    server, loop = cpu_s(pid, before) if pid else (0.0, 0.0)
    client = cpu_s()[0] - client
    ok = sum(1 for s in statuses if s == 200)
    return {
        "server_cpu_ms": server / len(times) * 1e3,
        "loop_cpu_ms": loop / len(times) * 1e3,
        "client_cpu_ms": client / len(times) * 1e3,
        "n": len(times),
        "per_s": ok / total,
        **latencies(times),
        "non_200": len(statuses) - ok,
    }


def memory_by_size(data_dir: Path) -> list[tuple[int, float, float, float]]:
    """(picture side, MB the decode added over the warm process's resident set, peak MB,
    seconds) for square pictures, each decode (and its PNG) in a fresh process whose session
    is already built (its peak reset just before the decode; tools/bench_tiles.py)."""
    rows = []
    for latent in (16, 32, 48, 64):
        got = bench_tiles.in_process(data_dir, "float", latent, None)
        base, peak = got["base"] / 2**20, got["peak"] / 2**20
        rows.append((latent * 16, peak - base, peak, got["seconds"]))
    return rows


def _median_rows(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the round with the median throughput (the machine is shared: rounds are
    interleaved so that a busy spell hits every configuration alike)."""
    out = {}
    for key in rounds[0]:
        ordered = sorted((r[key] for r in rounds), key=lambda row: row["per_s"])
        out[key] = ordered[len(ordered) // 2]
    return out


def _best_us(fn: Any) -> float:
    return best_of(fn, 200) * 1e6


def overheads(decoder: Any, body: bytes, cbor: bytes, url: str) -> dict[str, float]:
    """The per-request costs that differ between the forms, each timed on its own (best of
    200): parsing the envelope as JSON or CBOR, the answer as JSON with base64 PNG or raw, and
    an HTTP round trip to /healthz (the HTTP stack alone)."""

    import httpx

    png = decoder.decode(parse_json(body)).png()
    answer = {"png": png, "reports": [{"kind": "wai-neural-dispatch/1"}], "set": "0" * 64}

    def as_json() -> bytes:
        return json.dumps({**answer, "png": base64.b64encode(png).decode()}).encode()

    with httpx.Client(base_url=url) as c:
        health = _best_us(lambda: c.get("/healthz"))
    return {
        "parse JSON envelope": _best_us(lambda: parse_json(body)),
        "parse CBOR envelope": _best_us(lambda: parse_cbor(cbor)),
        "answer JSON, base64 PNG": _best_us(as_json),
        "answer raw PNG (+ headers)": _best_us(lambda: json.dumps(answer["reports"])),
        "HTTP round trip, /healthz": health,
        "png_bytes": float(len(png)),
    }


def route(requests: int, concurrency: int) -> None:
    """``--route``: the steps' times in the instrumented server beside the in-process anchor."""
    load = loadavg()
    body = SAMPLE.read_bytes()
    with tempfile.TemporaryDirectory(prefix="wai-profile-") as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "clock.json"
        port = free_port()
        argv = ("-m", "wai_dispatch.tools.route_clock", str(data), str(port), str(out))
        with (
            (Path(tmp) / "server.log").open("w") as log,
            service(data, argv=argv, port=port, log=log) as served,
        ):
            url, token = served.url, served.token
            over_http(url, token, body, 4, concurrency)  # warm
            os.kill(served.proc.pid, signal.SIGUSR1)
            time.sleep(0.2)
            driven = over_http(url, token, body, requests, concurrency)
            if driven["non_200"]:
                raise RuntimeError(f"{driven['non_200']} answers were not 200")
            os.kill(served.proc.pid, signal.SIGUSR2)
            with contextlib.suppress(TimeoutError):  # none: said below, with the server's log
                wait_until(out.exists, 30, "clock", every=0.1)
            time.sleep(0.2)  # written whole
            decoder = Decoder.assemble(Path(tmp) / "anchor")
            decoder.decode(parse(body)).png()  # warm
            anchor = in_process(decoder, body, requests, concurrency)
        if not out.exists():
            raise RuntimeError(
                "the profiled service wrote no clock:\n"
                + (Path(tmp) / "server.log").read_text()[-3000:]
            )
        clock = json.loads(out.read_text())
    after = loadavg()
    n, wall = driven["n"], driven["mean_ms"]
    app = clock["ns"]["app"] / n / 1e6
    print(
        f"POST /v1/decode, 256×256 sample, JSON answer, concurrency {concurrency}: {n} "
        f"requests, {driven['per_s']:.2f} decodes/s; {load} → {after}"
    )
    steps = {step: clock["ns"].get(step, 0) / n / 1e6 for step in STEPS}
    # the bearer token is looked up inside its dependency's hop: counted there
    rest = app - sum(ms for step, ms in steps.items() if step != "bearer token")
    steps["rest of the app (middleware, routing, hops)"] = rest
    steps["outside the app (uvicorn, socket, client)"] = wall - app
    steps["the request, as the client saw it"] = wall
    shares = ([step, ms, ms / wall] for step, ms in steps.items())
    table(["step", "ms/request", "of the request"], shares, "- .2f .1%")
    hops = clock["n"].get("sync dependencies (each a thread hop)", 0) / n
    commit = clock["ns"].get("(the commit itself, in the committer's thread)", 0) / n / 1e6
    print(
        f"  ({hops:.0f} sync dependency hops a request; the commit itself, overlapped in the "
        f"committer's thread: {commit:.2f} ms a request)"
    )
    print(
        f"in this process, the same decodes from {concurrency} threads (the server idle): "
        f"{anchor['per_s']:.2f} decodes/s, decode {anchor['decode_ms']:.2f} ms, PNG "
        f"{anchor['png_ms']:.2f} ms; HTTP ÷ in-process {driven['per_s'] / anchor['per_s']:.0%}"
    )
    used = {name: s * 1e3 / n for name, s in clock["cpu_s"].items() if s > 0}
    server, client = sum(used.values()), driven["client_cpu_ms"]
    print("\nCPU ms a request by thread (the load stretches CPU time far less than the wall):")
    rows = [[f"server: {name}", ms] for name, ms in sorted(used.items(), key=lambda kv: -kv[1])]
    rows += [
        ["server, all of it", server],
        ["the HTTP clients (http.client, this process)", client],
    ]
    rows += [["in process: parse, decode, PNG", anchor["cpu_ms"]]]
    table(["thread", "CPU ms"], rows, "- .2f", indent="  ")
    print(f"  in-process CPU ÷ (server + clients): {anchor['cpu_ms'] / (server + client):.0%}")


def _cpu_table(anchor: dict[str, float], http: dict[str, float]) -> None:
    """Where a decode's CPU goes over HTTP beside in process (the CPU time a request, which the
    machine's load stretches far less than the wall clock; on 2 cores shared with the client,
    the rate follows it)."""
    inside, server = anchor["cpu_ms"], http["server_cpu_ms"]
    loop, client = http["loop_cpu_ms"], http["client_cpu_ms"]
    rows = (
        ("in process, 2 threads: parse, decode, PNG", inside),
        ("HTTP, concurrency 2: the server, all of it", server),
        ("  its event loop (uvicorn, FastAPI, route)", loop),
        ("  its other threads (decodes, commits)", server - loop),
        ("  beyond the in-process decode", server - inside),
        ("the HTTP clients (http.client, this process)", client),
    )
    print("\nCPU ms a decode (the rows above' medians):")
    table(["", "CPU ms"], rows, "- .2f", indent="  ")
    print(f"  in-process CPU ÷ (server + client CPU): {inside / (server + client):.0%}")


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("service", __doc__)
    p.add_argument("--requests", type=int, default=24, help="decodes per row and round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median shown)")
    p.add_argument("--no-memory", action="store_true", help="skip peak memory by picture size")
    p.add_argument("--route", action="store_true", help="instead: one decode's steps (the doc)")
    p.add_argument("--concurrency", type=int, default=2, help="--route: clients at once (2)")
    args = p.parse_args(argv)
    if args.route:
        route(args.requests, args.concurrency)
        return 0
    body = SAMPLE.read_bytes()
    cbor = (envelopes_dir() / "bmshj2018-demo-q3.cbor").read_bytes()
    n = args.requests
    with tempfile.TemporaryDirectory(prefix="wai-bench-") as tmp:
        data_dir = Path(tmp)
        decoder = Decoder.assemble(data_dir)
        decoder.decode(parse(body)).png()  # warm: session built, tables parsed
        with service(data_dir, QUEUE) as served:
            url, token, pid = served.url, served.token, served.proc.pid
            over_http(url, token, body, 4, 1)  # warm
            idle = memory_kib(served.proc.pid)
            rounds = []
            for _ in range(args.rounds):
                rounds.append(
                    {
                        "in-process loop": in_process(decoder, body, n),
                        "in-process, 2 threads": in_process(decoder, body, n, threads=2),
                        **{
                            f"HTTP, concurrency {c}": over_http(url, token, body, n, c, pid)
                            for c in (1, 2, 8)
                        },
                    }
                )
            rows = _median_rows(rounds)
            costs = overheads(decoder, body, cbor, url)
            loaded = memory_kib(served.proc.pid)
        sizes = [] if args.no_memory else memory_by_size(data_dir)
    anchor = rows["in-process loop"]["per_s"]
    print(
        f"256×256 sample; {n} decodes per row, median of {args.rounds} interleaved rounds; "
        f"{loadavg()}, shared with the client"
    )
    table(
        ["", "decodes/s", "vs loop", "p50 ms", "p99 ms", "p99/p50", "not 200"],
        (
            [
                name,
                r["per_s"],
                r["per_s"] / anchor,
                *(r[k] for k in ("p50_ms", "p99_ms")),
                r["p99_ms"] / r["p50_ms"],
                str(r.get("non_200", "")),
            ]
            for name, r in rows.items()
        ),
        "- .2f .0% .1f .1f .2f",
    )
    ratio = rows["HTTP, concurrency 2"]["per_s"] / rows["in-process, 2 threads"]["per_s"]
    goal = f"goal ≥ 95%: {met(ratio >= 0.95)}"
    print(f"HTTP at concurrency 2 ÷ in-process from 2 threads: {ratio:.0%} ({goal})")
    _cpu_table(rows["in-process, 2 threads"], rows["HTTP, concurrency 2"])
    png_kb = costs.pop("png_bytes") / 1024
    print(f"\nper-request costs that differ by form (best of 200; the PNG is {png_kb:.0f} KiB):")
    table(["", "µs"], costs.items(), "- .0f", indent="  ")
    print(
        f"\nserver resident memory: {idle['VmRSS'] >> 10} MB after warm-up (the 1 bundled set "
        f"loaded), {loaded['VmRSS'] >> 10} MB after the runs, peak {loaded['VmHWM'] >> 10} MB"
    )
    if sizes:
        print("\none decode's memory by picture size (fresh warm process each; VmHWM reset")
        print("before the decode; B/pixel: the decode's MB over output pixels):")
        table(
            ["picture", "+decode MB", "peak MB", "seconds", "B/pixel"],
            ([f"{d}×{d}", extra, peak, s, extra * 2**20 / d**2] for d, extra, peak, s in sizes),
            "- .0f .0f .2f .0f",
            indent="  ",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
