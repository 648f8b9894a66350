"""``python -m wai_dispatch.tools.bench_warm``: the first decode after ``/readyz`` says ready,
beside a warm decode of the same envelope in the same process (the anchor), for a real
``wai-dispatch serve`` started with warming on and with it off; and the process's start to
ready. Goal: the first decode after ready within 2× a warm one."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.store import bearer
from wai_dispatch.service.store.report_store import ReportStore

SAMPLES = ("bmshj2018-demo-q3.json", "int-synth-demo-q3.json")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _token(data: Path) -> str:
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    store.migrate()
    secret = bearer.create(store, "bench", bearer.Role.sink)
    store.dispose()
    return secret


def one_run(warm: bool, body: bytes, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="wai-bench-warm-") as tmp:
        data = Path(tmp)
        secret = _token(data)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WAI_")}
        port = _free_port()
        env |= {"WAI_DATA_DIR": tmp, "WAI_PORT": str(port), "WAI_WARM": str(warm).lower()}
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "wai_dispatch", "serve"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError("serve exited")
                try:
                    if httpx.get(base + "/readyz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            ready = time.perf_counter() - started
            headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
            times = []
            with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
                for _ in range(n + 1):
                    t0 = time.perf_counter()
                    r = c.post("/v1/decode", content=body)
                    times.append(time.perf_counter() - t0)
                    if r.status_code != 200:
                        raise RuntimeError(r.text)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {
        "ready_s": ready,
        "first_ms": times[0] * 1e3,
        "warm_ms": statistics.median(times[1:]) * 1e3,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_warm", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="3 warm decodes, not 10")
    args = ap.parse_args(argv)
    n = 3 if args.quick else 10
    print(f"load average {os.getloadavg()[0]:.2f}; first decode after ready vs the warm median")
    print(f"{'envelope':<26} {'warming':<8} {'start→ready':>12} {'first':>9} {'warm':>9} ratio")
    for name in SAMPLES:
        body = (envelopes_dir() / name).read_bytes()
        for warm in (True, False):
            r = one_run(warm, body, n)
            ratio = r["first_ms"] / r["warm_ms"]
            goal = " (goal ≤ 2)" if warm else ""
            print(
                f"{name:<26} {'on' if warm else 'off':<8} {r['ready_s']:>10.2f} s"
                f" {r['first_ms']:>7.1f}ms {r['warm_ms']:>7.1f}ms {ratio:.2f}×{goal}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
