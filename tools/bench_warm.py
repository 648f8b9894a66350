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
from wai_dispatch.tools.harness import decode_headers, loadavg, parser, service, table, timings

SAMPLES = ("bmshj2018-demo-q3.json", "int-synth-int8-units-demo-q3.json")


def one_run(warm: bool, body: bytes, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="wai-bench-warm-") as tmp:
        started = time.perf_counter()
        with service(Path(tmp), {"WAI_WARM": str(warm).lower()}) as served:
            ready = time.perf_counter() - started
            headers = decode_headers(served.token)
            with httpx.Client(base_url=served.url, headers=headers, timeout=120) as c:
                times = timings(
                    lambda: c.post("/v1/decode", content=body).raise_for_status(), n + 1
                )
    return {
        "ready_s": ready,
        "first_ms": times[0] * 1e3,
        "warm_ms": statistics.median(times[1:]) * 1e3,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parser("warm", __doc__, quick="3 warm decodes, not 10").parse_args(argv)
    n = 3 if args.quick else 10
    print(f"{loadavg()}; first decode after ready vs the warm median")
    rows = []
    for name in SAMPLES:
        body = (envelopes_dir() / name).read_bytes()
        for warm in (True, False):
            r = one_run(warm, body, n)
            ratio = f"{r['first_ms'] / r['warm_ms']:.2f}×" + (" (goal ≤ 2)" if warm else "")
            rows.append([name, "on" if warm else "off", r["ready_s"], r["first_ms"], r["warm_ms"]])
            rows[-1].append(ratio)
    head = ["envelope", "warming", "start→ready s", "first ms", "warm ms", "ratio"]
    table(head, rows, "- - .2f .1f .1f")
    return 0


if __name__ == "__main__":
    sys.exit(main())
