"""``python -m wai_dispatch.tools.profile_route``: where one ``POST /v1/decode``'s time goes, step
by step (:data:`STEPS`; docs/performance.md names the function each times), in a server child
(tools/route_clock.py) driven at ``--concurrency``, beside the anchor: the same decodes and
PNGs from as many threads in this process."""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from wai_dispatch.codec.envelope import parse
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.tools.bench_service import over_http
from wai_dispatch.tools.harness import free_port, loadavg, service

SAMPLE = envelopes_dir() / "bmshj2018-demo-q3.json"
#: The steps in the order a request meets them (the module's doc says what each is).
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
    "answer (base64, model, JSON)",
)


def in_process(data: Path, body: bytes, n: int, concurrency: int) -> tuple[float, float, float]:
    """The anchor: decodes/s, and the decode's and the PNG's mean ms."""
    decoder = Decoder.assemble(data)
    decoder.decode(parse(body)).png()  # warm
    decode_ns: list[int] = []
    png_ns: list[int] = []

    def one(_: int) -> None:
        t = time.perf_counter_ns()
        result = decoder.decode(parse(body))
        t2 = time.perf_counter_ns()
        result.png()
        decode_ns.append(t2 - t)
        png_ns.append(time.perf_counter_ns() - t2)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(n)))
    took = time.perf_counter() - t0
    return n / took, sum(decode_ns) / n / 1e6, sum(png_ns) / n / 1e6


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.profile_route")
    p.add_argument("--requests", type=int, default=40)
    p.add_argument("--concurrency", type=int, default=2)
    args = p.parse_args(argv)
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
            over_http(url, token, body, 4, args.concurrency)  # warm
            os.kill(served.proc.pid, signal.SIGUSR1)
            time.sleep(0.2)
            driven = over_http(url, token, body, args.requests, args.concurrency)
            if driven["non_200"]:
                raise RuntimeError(f"{driven['non_200']} answers were not 200")
            os.kill(served.proc.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.2)  # written whole
            anchor = in_process(Path(tmp) / "anchor", body, args.requests, args.concurrency)
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
        f"POST /v1/decode, 256×256 sample, JSON answer, concurrency {args.concurrency}: {n} "
        f"requests, {driven['per_s']:.2f} decodes/s; {load} → {after}"
    )
    print(f"{'step':44} {'ms/request':>10} {'of the request':>15}")
    accounted = 0.0
    for step in STEPS:
        ms = clock["ns"].get(step, 0) / n / 1e6
        # the bearer token is looked up inside its dependency's hop: counted there
        accounted += 0 if step == "bearer token" else ms
        print(f"{step:44} {ms:10.2f} {ms / wall:15.1%}")
    hops = clock["n"].get("sync dependencies (each a thread hop)", 0) / n
    commit = clock["ns"].get("(the commit itself, in the committer's thread)", 0) / n / 1e6
    print(
        f"  ({hops:.0f} sync dependency hops a request; the commit itself, overlapped in the "
        f"committer's thread: {commit:.2f} ms a request)"
    )
    rest = app - accounted
    print(f"{'rest of the app (middleware, routing, hops)':44} {rest:10.2f} {rest / wall:15.1%}")
    print(
        f"{'outside the app (uvicorn, socket, client)':44} {wall - app:10.2f} "
        f"{(wall - app) / wall:15.1%}"
    )
    print(f"{'the request, as the client saw it':44} {wall:10.2f} {1:15.1%}")
    rate, decode_ms, png_ms = anchor
    print(
        f"in this process, the same decodes from {args.concurrency} threads (the server idle): "
        f"{rate:.2f} decodes/s, decode {decode_ms:.2f} ms, PNG {png_ms:.2f} ms; HTTP ÷ "
        f"in-process {driven['per_s'] / rate:.0%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
