"""``python -m wai_dispatch.tools.bench_ray``: decodes per second through Ray Serve's HTTP proxy
on a real local cluster (tools/ray_cluster.py) with 2 replicas beside 1 (the anchor: the mean
of a 1-replica run before and after), from the same closed loop of clients; each replica's
resident memory. Needs the ray extra and PostgreSQL.

``--burst``: Serve's autoscaling meeting docs/ray.md's burst on the same cluster, deployed
``--autoscale 1:2 --replica-cpus 1``. Printed, in seconds from the burst's start: the decision
to upscale (the controller's log), the second replica's process, its ``replica ready`` line, its
first answer; each replica's share of the answers; then, from the burst's end, the decision to
downscale and the replica gone."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import httpx

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.tools.harness import (
    LOCAL_PG,
    database,
    decode_headers,
    for_seconds,
    loadavg,
    missing,
    ready,
    wait_until,
)
from wai_dispatch.tools.harness import parser as harness_parser
from wai_dispatch.tools.ray_cluster import LocalCluster, deploy, local_cluster, replica_rss_mib

SAMPLE = envelopes_dir() / "bmshj2018-demo-q3.json"


def rate(url: str, token: str, seconds: float, clients: int) -> tuple[float, int, int]:
    """Decodes a second of ``clients`` closed-loop clients for ``seconds`` (after two warm-up
    decodes each); with the count of 200s and of other answers."""
    body = SAMPLE.read_bytes()
    # a connection per request: the kernel spreads them over the nodes' Serve proxies (each
    # listens on the port, SO_REUSEPORT) as a load balancer would; a proxy prefers its own
    # node's replica
    headers = decode_headers(token, Connection="close")
    ok = [0] * clients
    bad = [0] * clients

    def one(i: int, go: Callable[[], object], stop: threading.Event) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
            for _ in range(2):
                c.post("/v1/decode", content=body)
            go()
            while not stop.is_set():
                r = c.post("/v1/decode", content=body)
                if stop.is_set():
                    break
                if r.status_code == 200:
                    ok[i] += 1
                else:
                    bad[i] += 1

    took = for_seconds(one, clients, seconds)
    return sum(ok) / took, sum(ok), sum(bad)


#: Serve's controller log line for a scaling decision (its time is the node's local time).
_DECISION = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}).*?(Upscaling|Downscaling) Deployment\("
)


def decisions(cluster: LocalCluster) -> list[tuple[float, str]]:
    """(wall time, ``Upscaling``/``Downscaling``) of each decision Serve's controller logged."""
    out = []
    for log in cluster.root.rglob("controller_*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if (m := _DECISION.search(line)) is not None:
                when = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out.append((when, m.group(2)))
    return sorted(out)


def ready_lines(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    """Each replica's ``replica ready`` log line (service/rayserve/deployment.py), by replica."""
    out: dict[str, dict[str, float]] = {}
    for log in cluster.root.rglob("*.err"):
        for line in log.read_text(errors="replace").splitlines():
            if '"replica ready"' not in line:
                continue
            try:
                obj = json.loads(line[line.index("{") :])
            except ValueError:
                continue
            out[str(obj.get("replica"))] = {
                k: float(obj[k]) for k in ("start_s", "warm_s", "ready_s") if k in obj
            }
    return out


def burst(
    cluster: LocalCluster, url: str, token: str, seconds: float, clients: int, body: bytes
) -> None:
    """Run the burst on the deployed service and print its figures (the module's doc)."""
    headers = decode_headers(token, Connection="close")
    answers: list[tuple[float, str]] = []  # (seconds into the burst, replica) of each 200
    other: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()
    quiet = loadavg()
    t0 = time.monotonic()
    wall0 = time.time()

    def one() -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
            while not stop.is_set():
                try:
                    r = c.post("/v1/decode", content=body)
                except httpx.HTTPError as exc:
                    with lock:
                        other[type(exc).__name__] += 1
                    continue
                with lock:
                    if r.status_code == 200:
                        answers.append((time.monotonic() - t0, r.headers["x-replica"]))
                    else:
                        other[str(r.status_code)] += 1

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    placed: float | None = None
    while (now := time.monotonic() - t0) < seconds:
        if placed is None and len(cluster.replicas()) >= 2:
            placed = now
        time.sleep(0.25)
    stop.set()
    for t in threads:
        t.join()
    ended = time.monotonic()
    wall_end = time.time()
    during = loadavg()
    gone: float | None = None
    while time.monotonic() - ended < 600:
        if len(cluster.replicas()) <= 1:
            gone = time.monotonic() - ended
            break
        time.sleep(1)
    after = loadavg()

    first_seen: dict[str, float] = {}
    for when, replica in answers:
        first_seen.setdefault(replica, when)
    share = Counter(replica for _, replica in answers)
    order = sorted(first_seen, key=first_seen.__getitem__)
    made = decisions(cluster)
    up = next((w - wall0 for w, kind in made if kind == "Upscaling" and w >= wall0 - 1), None)
    down = next((w - wall_end for w, kind in made if kind == "Downscaling" and w >= wall_end), None)
    ready = ready_lines(cluster)

    def s(x: float | None) -> str:
        return "—" if x is None else f"{x:.1f} s"

    print(
        f"burst: {clients} clients × {seconds:.0f} s, {len(answers)} decodes answered 200, "
        f"{sum(other.values())} other {dict(other) or ''}; {quiet} before, "
        f"{during} at the burst's end, {after} after the scale-down"
    )
    print(
        f"  upscale: Serve decided at {s(up)}, the second replica's process at {s(placed)}, "
        f"its first answer at {s(first_seen[order[1]] if len(order) > 1 else None)} "
        f"(from the burst's start)"
    )
    if len(order) > 1 and order[1] in ready:
        r = ready[order[1]]
        print(
            f"  the second replica's start (its log): service start with the sets fetched "
            f"{s(r.get('start_s'))}, warming {s(r.get('warm_s'))}, ready {s(r.get('ready_s'))} "
            f"after Serve built it"
        )
    for replica in order:
        print(
            f"  {replica}: {share[replica]} decodes ({share[replica] / len(answers):.0%} of "
            f"the burst), first at {s(first_seen[replica])}"
        )
    print(
        f"  downscale: Serve decided at {s(down)}, the second replica gone at {s(gone)} "
        f"(from the burst's end)"
    )


def _ready(cluster: LocalCluster, url: str, replicas: int) -> None:
    def done() -> bool:
        return len(cluster.replicas()) == replicas and ready(url)

    wait_until(done, 300, f"{replicas} replica(s) ready", every=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness_parser("ray", __doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="each measured run")
    parser.add_argument("--clients", type=int, default=4, help="closed-loop clients")
    parser.add_argument("--postgres", default=LOCAL_PG, help="a PostgreSQL admin URL")
    parser.add_argument(
        "--burst",
        action="store_true",
        help="instead: autoscale 1:2 meeting --clients for --seconds",
    )
    args = parser.parse_args(argv)
    if missing("ray", "ray", "the ray extra, wai-dispatch[ray],"):
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="wai-bench-ray-") as folder,
        database(args.postgres, Path(folder)) as store_url,
        local_cluster(nodes=2, cpus=1) as cluster,
    ):
        root = Path(folder)
        env = {
            "WAI_DATABASE_URL": store_url,
            "WAI_DATA_DIR": str(root / "data"),
            "WAI_SPOOL_DIR": str(root / "spool"),
            "WAI_LOG_LEVEL": "WARNING",
        }
        url = f"http://127.0.0.1:{cluster.proxy_port}"
        if args.burst:  # the replicas' INFO lines say how long each took to start
            t0 = time.monotonic()
            deploy(
                cluster,
                {**env, "WAI_LOG_LEVEL": "INFO"},
                "--autoscale",
                "1:2",
                "--replica-cpus",
                "1",
            )
            _ready(cluster, url, 1)
            print(f"autoscale 1:2 deployed and ready in {time.monotonic() - t0:.0f} s", flush=True)
            token = (root / "data" / "admin-token").read_text().strip()
            burst(cluster, url, token, args.seconds, args.clients, SAMPLE.read_bytes())
            return 0
        runs: list[tuple[int, float]] = []
        rss: dict[int, float] = {}
        # 1, 2, then 1 again: the anchor is the mean of the runs either side, so that a drift
        # of the machine's other load over the minutes shows (and is halved) rather than
        # passing for the replicas' effect
        for replicas in (1, 2, 1):
            t0 = time.monotonic()
            deploy(cluster, env, "--replicas", str(replicas))
            _ready(cluster, url, replicas)
            print(
                f"{replicas} replica(s) deployed and ready in {time.monotonic() - t0:.0f} s",
                flush=True,
            )
            token = (root / "data" / "admin-token").read_text().strip()
            before = loadavg()
            per_s, ok, bad = rate(url, token, args.seconds, args.clients)
            runs.append((replicas, per_s))
            if replicas == 2:
                rss = replica_rss_mib(cluster)
            print(
                f"  {replicas} replica(s): {per_s:6.2f} decodes/s ({ok} answered 200, {bad} "
                f"other; {args.clients} clients, {args.seconds:.0f} s); "
                f"{before} → {loadavg()}",
                flush=True,
            )
        ones = [r for n, r in runs if n == 1]
        anchor = sum(ones) / len(ones)
        two = next(r for n, r in runs if n == 2)
        ratio = two / anchor if anchor else float("nan")
        print(
            f"2 replicas: {two:.2f} decodes/s = {ratio:.2f}× the 1-replica anchor "
            f"({anchor:.2f} decodes/s, the mean of {ones[0]:.2f} before and {ones[1]:.2f} "
            f"after); 256×256 sample, cpu/onnx-runtime/float, 1 CPU each, "
            f"{os.cpu_count()} cores in the machine"
        )
        print(
            "replica RSS: " + ", ".join(f"{v:.0f} MiB" for v in rss.values()) + " (VmRSS of "
            "each ray::ServeReplica process, warm, after the 2-replica run)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
