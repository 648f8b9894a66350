"""``python -m wai_dispatch.tools.bench_warm``: the first decode after ``/readyz`` beside a warm one
(the anchor), warming on and off, and start to ready. Goal: within 2× a warm decode."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.tools.harness import decode_headers, loadavg, parser, service

SAMPLES = ("bmshj2018-demo-q3.json", "int-synth-int8-units-demo-q3.json")


def one_run(warm: bool, body: bytes, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="wai-bench-warm-") as tmp:
        started = time.perf_counter()
        with service(Path(tmp), {"WAI_WARM": str(warm).lower()}) as served:
            ready = time.perf_counter() - started
            times = []
            headers = decode_headers(served.token)
            with httpx.Client(base_url=served.url, headers=headers, timeout=120) as c:
                for _ in range(n + 1):
                    t0 = time.perf_counter()
                    r = c.post("/v1/decode", content=body)
                    times.append(time.perf_counter() - t0)
                    if r.status_code != 200:
                        raise RuntimeError(r.text)
    return {
        "ready_s": ready,
        "first_ms": times[0] * 1e3,
        "warm_ms": statistics.median(times[1:]) * 1e3,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser("warm", __doc__)
    ap.add_argument("--quick", action="store_true", help="3 warm decodes, not 10")
    args = ap.parse_args(argv)
    n = 3 if args.quick else 10
    print(f"{loadavg()}; first decode after ready vs the warm median")
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
