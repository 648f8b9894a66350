"""Nothing lost: a private PostgreSQL cluster is stopped mid-run under load and restarted;
decodes keep answering (their reports spooled, fsync'd), the spool is replayed in order when
the store is back, and every acknowledged report is in the store exactly once."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _svc import SAMPLE_JSON, free_port, serve
from sqlalchemy import create_engine, text

PG_BIN = shutil.which("pg_ctl")
pytestmark = pytest.mark.skipif(
    PG_BIN is None or shutil.which("initdb") is None, reason="initdb/pg_ctl not on PATH"
)


class Cluster:
    """A throwaway PostgreSQL cluster on a loopback port (run as ``postgres`` under root)."""

    def __init__(self, root: Path, port: int) -> None:
        self.dir = root / "pgdata"
        self.port = port
        self.log = root / "pg.log"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            pw = pwd.getpwnam("postgres")
            os.chown(root, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.dir), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=on"
        self._run("pg_ctl", "-D", str(self.dir), "-l", str(self.log), "-o", opts, "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="wai-pg-"))
    os.chmod(root, 0o755)
    c = Cluster(root, free_port())
    c.start()
    try:
        yield c
    finally:
        subprocess.run([*c.as_user, "pg_ctl", "-D", str(c.dir), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


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
