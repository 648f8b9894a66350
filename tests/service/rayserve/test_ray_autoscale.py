"""Autoscaling on a real local Ray cluster (tools/ray_cluster.py: a head and a second node of one
CPU each, two CPUs in all), deployed by ``wai-dispatch serve --ray --autoscale 1:2`` on a private
PostgreSQL database with the plan's autoscaling defaults (service/rayserve/plan.py, docs/ray.md).

The burst is docs/ray.md's: :data:`BURST_CLIENTS` closed-loop clients, twice the target of
ongoing requests per replica times the two replicas, each retrying as docs/ray.md's client does
(the same ``X-Request-Id`` after a dropped connection or a 5xx from Serve's proxy). It runs
until the second replica has answered, or a generous bound passes. What it asserts holds on a
loaded 2-core machine: the replica count grew, both replicas answered (counted by each
answer's ``X-Replica``) and every decode was answered 200 in the end; never how soon nor what
share (on 2 cores shared with other work the second replica's share is the load's, not
Serve's: the times, the share and the retries are printed; ``bench ray --burst`` measures
them).

Marked ``ray`` (deselected by default and by CI; ``make ray``); skips without the ray extra."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from _svc import SAMPLE_JSON

from wai_dispatch.tools.ray_cluster import LocalCluster, deploy, local_cluster, post_retrying

pytest.importorskip("ray", reason="the ray extra: pip install 'wai-dispatch[ray]'")

pytestmark = pytest.mark.ray

#: The burst of docs/ray.md: 2 (target ongoing requests) × 2 replicas.
BURST_CLIENTS = 4
#: A generous bound for a loaded 2-core machine: the second replica placed and answering.
UPSCALED_WITHIN_S = 300.0


@dataclass
class Scaled:
    cluster: LocalCluster
    url: str
    token: str


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scaled]:
    from _svc import pg_admin_url, pg_database

    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    if pg_admin_url() is None:
        pytest.skip("no PostgreSQL: nothing answers on 127.0.0.1:5432 and initdb is missing")
    root = tmp_path_factory.mktemp("autoscale")
    with pg_database() as database, local_cluster(nodes=2, cpus=1) as cluster:
        env = {
            "WAI_DATABASE_URL": database,
            "WAI_DATA_DIR": str(root / "data"),
            "WAI_SPOOL_DIR": str(root / "spool"),
            "WAI_LOG_LEVEL": "WARNING",
        }  # the bundled sets, through the registry: every replica fetches and warms them
        started = time.monotonic()
        printed = deploy(cluster, env, "--autoscale", "1:2", "--replica-cpus", "1")
        print(f"\ndeployed (autoscale 1:2) in {time.monotonic() - started:.0f} s")
        assert "wai-dispatch serving on" in printed
        assert "can be placed" not in printed  # 2 × 1 CPU fit the cluster's 2
        store = ReportStore(database)
        token = bearer.create(store, "sink-burst", bearer.Role.sink)
        store.dispose()
        yield Scaled(cluster, f"http://127.0.0.1:{cluster.proxy_port}", token)


def test_a_burst_gets_a_second_replica_that_serves_part_of_it(scaled: Scaled) -> None:
    # a connection per request: the kernel spreads them over the two nodes' proxies
    headers = {
        "Authorization": f"Bearer {scaled.token}",
        "Connection": "close",
        "Content-Type": "application/json",
    }
    body = SAMPLE_JSON.read_bytes()
    with httpx.Client(base_url=scaled.url, headers=headers, timeout=120) as c:
        first = c.post("/v1/decode", content=body)
    assert first.status_code == 200, first.text
    assert len(scaled.cluster.replicas()) == 1  # min_replicas: one before the burst

    answered: Counter[str] = Counter()  # replica → decodes it answered (200) in the burst
    failed: Counter[str] = Counter()  # what the decodes that failed every retry last got
    retries: Counter[str] = Counter()  # what each failed try got (then retried)
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(base_url=scaled.url, headers=headers, timeout=120) as c:
            while not stop.is_set():
                got, tries = post_retrying(c, "/v1/decode", body, {})
                with lock:
                    retries.update(tries)
                    if got is not None and got.status_code == 200:
                        answered[got.headers["x-replica"]] += 1
                    else:
                        failed[str(got.status_code) if got else tries[-1]] += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(BURST_CLIENTS)]
    for t in threads:
        t.start()
    placed = serving = None
    deadline = t0 + UPSCALED_WITHIN_S
    try:
        while time.monotonic() < deadline:
            if placed is None and len(scaled.cluster.replicas()) >= 2:
                placed = time.monotonic() - t0
            with lock:
                both = len(answered) >= 2
            if both:
                serving = time.monotonic() - t0
                break
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join()
    took = time.monotonic() - t0

    def at(s: float | None) -> str:
        return "never" if s is None else f"at {s:.0f} s"

    print(
        f"burst of {BURST_CLIENTS} clients, {took:.0f} s, load average "
        f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}: the second replica's process "
        f"{at(placed)}, its first answer {at(serving)}; answered {dict(answered)}, failed "
        f"{dict(failed)}, failed tries retried {dict(retries)}"
    )
    assert placed is not None, f"no second replica within {UPSCALED_WITHIN_S:.0f} s"
    assert len(answered) == 2, f"one replica answered the whole burst: {dict(answered)}"
    assert not failed, f"decodes that failed every retry: {dict(failed)}"
