"""Nothing lost: a private PostgreSQL cluster is stopped mid-run under load and restarted;
decodes keep answering (their reports spooled, fsync'd), the spool is replayed in order when
the store is back, and every acknowledged report is in the store exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _svc import SAMPLE_JSON, Cluster, pg_bin, private_cluster, serve
from sqlalchemy import create_engine, text

pytestmark = [
    pytest.mark.skipif(
        pg_bin("initdb") is None or pg_bin("pg_ctl") is None, reason="no initdb/pg_ctl"
    ),
    pytest.mark.postgres,  # a private cluster of its own, stopped and started mid-run
    pytest.mark.slow,
]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with private_cluster() as running:
        yield running


def test_store_outage_under_load_loses_nothing(cluster: Cluster, tmp_path: Path) -> None:
    acked: list[str] = []
    failures: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()
    body = SAMPLE_JSON.read_bytes()

    with serve(tmp_path / "data", database_url=cluster.url, decode_threads=2, queue=32) as live:
        headers = {"Authorization": f"Bearer {live.tokens['sink']}",
                   "Content-Type": "application/json"}  # fmt: skip

        def load() -> None:
            with httpx.Client(base_url=live.url, timeout=60) as c:
                while not stop.is_set():
                    r = c.post("/v1/decode", content=body, headers=headers)
                    with lock:
                        if r.status_code == 200:
                            acked.extend(r.json()["report_ids"])
                        else:
                            failures.append(f"{r.status_code} {r.text[:200]}")

        def wait_for(n: int) -> None:
            deadline = time.monotonic() + 60
            while len(acked) < n and time.monotonic() < deadline:
                time.sleep(0.05)

        workers = [threading.Thread(target=load) for _ in range(3)]
        for w in workers:
            w.start()
        try:
            wait_for(8)
            before = len(acked)
            cluster.stop()  # mid-run, decodes in flight
            wait_for(before + 12)
            with httpx.Client(base_url=live.url) as c:
                ready = c.get("/readyz").json()
                spooled = live.service.recorder.pending_bytes()
                metrics = c.get("/metrics").text
            during = len(acked) - before
            cluster.start()
            wait_for(len(acked) + 8)
        finally:
            stop.set()
            for w in workers:
                w.join()
        deadline = time.monotonic() + 60
        while live.service.recorder.pending_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert live.service.recorder.pending_bytes() == 0

    assert failures == []
    assert during >= 12
    assert ready["store"] == "spooling" and ready["status"] == "ready"
    gauge = next(ln for ln in metrics.splitlines() if ln.startswith("wai_spool_bytes "))
    assert spooled > 0 and float(gauge.split()[1]) > 0
    assert "wai_store_up 0.0" in metrics
    engine = create_engine("postgresql+psycopg://" + cluster.url.split("://", 1)[1])
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, count(*) FROM reports GROUP BY id")).all()
        total = conn.execute(text("SELECT count(*) FROM reports")).scalar_one()
    engine.dispose()
    stored = {r[0]: r[1] for r in rows}
    assert len(set(acked)) == len(acked)
    assert set(acked) <= set(stored)  # every acknowledged report is there…
    assert all(n == 1 for n in stored.values())  # …exactly once
    assert total == len(acked)
