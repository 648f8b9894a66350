"""``python -m wai_dispatch.tools.bench ray --burst``: Serve's autoscaling meeting docs/ray.md's
burst on ``bench ray``'s local cluster, deployed ``--autoscale 1:2 --replica-cpus 1``. Printed,
in seconds from the burst's start: the decision to upscale (the controller's log), the second
replica's process, its ``replica ready`` line, its first answer; each replica's share of the
answers; then, from the burst's end, the decision to downscale and the replica gone."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from datetime import datetime

import httpx

from wai_dispatch.tools.harness import decode_headers, loadavg
from wai_dispatch.tools.ray_cluster import LocalCluster

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
