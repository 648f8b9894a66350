"""The service on a real local Ray cluster (tools/ray_cluster.py: a head and a second node, each
its own ``ray start`` with one CPU), deployed by ``wai-dispatch serve --ray`` with two replicas
on a private PostgreSQL database, reached through Serve's HTTP proxy.

Marked ``ray``: deselected by default (pyproject's addopts) and by CI, run by ``make ray``
(docs/ray.md says how long: a few minutes on 2 cores). Skips without the ray extra.

- a set installed through one replica (``POST /v1/sets``, the admin route) decodes on both, each
  answer naming its replica (``X-Replica``);
- a replica killed (SIGKILL) mid-load is restarted by Ray; the clients retry as docs/ray.md's
  operator does (the same ``X-Request-Id`` after Serve's 500 for a decode in flight on the
  killed replica, or a dropped connection), so every decode is acknowledged in the end and its
  report is in PostgreSQL exactly once (counted by request id);
- the ``serve run`` config of docs/ray.md (docs/examples/ray-serve.yaml) deploys and decodes."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _svc import SAMPLE_JSON

from wai_dispatch.conformance import sets_dir
from wai_dispatch.tools.ray_cluster import (
    LocalCluster,
    deploy,
    local_cluster,
    post_retrying,
    replica_rss_mib,
)

pytest.importorskip("ray", reason="the ray extra: pip install 'wai-dispatch[ray]'")

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "docs" / "examples" / "ray-serve.yaml"
JSON = {"Content-Type": "application/json"}


@dataclass
class Fleet:
    cluster: LocalCluster
    url: str
    database: str
    tokens: dict[str, str]
    env: dict[str, str]

    def client(self, role: str = "sink") -> httpx.Client:
        """A client opening a connection per request: each node's Serve proxy listens on the
        port (SO_REUSEPORT), the kernel spreads connections over them as a load balancer in
        front of the nodes would, and a proxy prefers its own node's replica."""
        auth = {"Authorization": f"Bearer {self.tokens[role]}", "Connection": "close"}
        return httpx.Client(base_url=self.url, headers=auth, timeout=120)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from _svc import pg_admin_url, pg_database

    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    if pg_admin_url() is None:
        pytest.skip("no PostgreSQL: nothing answers on 127.0.0.1:5432 and initdb is missing")
    root = tmp_path_factory.mktemp("fleet")
    with pg_database() as database, local_cluster(nodes=2, cpus=1) as cluster:
        env = {
            "WAI_DATABASE_URL": database,
            "WAI_DATA_DIR": str(root / "data"),
            "WAI_SPOOL_DIR": str(root / "spool"),  # the spool volume every replica shares
            "WAI_BUNDLED_SETS": "false",
            "WAI_SETS_REFRESH_S": "0.5",
            "WAI_LOG_LEVEL": "WARNING",
        }
        started = time.monotonic()
        printed = deploy(cluster, env, "--replicas", "2")
        print(f"\ndeployed 2 replicas in {time.monotonic() - started:.0f} s")
        assert "wai-dispatch serving on" in printed
        store = ReportStore(database)
        made = {
            "sink": bearer.create(store, "sink-ray", bearer.Role.sink),
            "admin": (root / "data" / "admin-token").read_text().strip(),
        }
        store.dispose()
        yield Fleet(cluster, f"http://127.0.0.1:{cluster.proxy_port}", database, made, env)


def _tgz(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buf.getvalue()


def _decode(client: httpx.Client, request_id: str | None = None) -> httpx.Response:
    headers = {**JSON, **({"X-Request-Id": request_id} if request_id else {})}
    return client.post("/v1/decode", content=SAMPLE_JSON.read_bytes(), headers=headers)


def test_a_set_installed_through_one_replica_decodes_on_all(fleet: Fleet) -> None:
    assert len(fleet.cluster.replicas()) == 2
    with fleet.client() as c:  # the registry starts empty (WAI_BUNDLED_SETS off)
        refused = _decode(c)
    assert refused.json()["error"]["code"] == "set_not_installed"
    with fleet.client("admin") as c:
        body = _tgz(Path(sets_dir()) / "bmshj2018-demo-q3")
        r = c.post("/v1/sets", content=body, headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    installer = r.headers["x-replica"]
    digest = r.json()["digest"]

    answered: dict[str, set[str]] = {}  # replica → the pictures' digests it answered with
    refused_by: dict[str, set[str]] = {}  # replica → its refusals (before its sync)
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def load() -> None:
        with fleet.client() as c:
            while time.monotonic() < deadline:
                got = _decode(c)
                if got.status_code == 200:
                    with lock:
                        answered.setdefault(got.headers["x-replica"], set()).add(
                            got.json()["rgb_digest"]
                        )
                        if len(answered) >= 2 and sum(map(len, answered.values())) >= 2:
                            return
                else:  # only a replica that has not synced yet may refuse, as unknown
                    with lock:
                        refused_by.setdefault(got.headers.get("x-replica", "?"), set()).add(
                            got.text
                        )
                    assert got.json()["error"]["code"] == "set_not_installed", got.text

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"set {digest[:12]} installed through {installer}; decoded by {sorted(answered)}")
    assert len(answered) == 2, f"one replica only answered: {answered}; refused: {refused_by}"
    assert installer in answered
    pictures = set().union(*answered.values())
    assert len(pictures) == 1, pictures  # the same picture from either replica


def _stored(database: str, ids: list[str]) -> dict[str, int]:
    from sqlalchemy import create_engine, text

    engine = create_engine(database.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT request_id, count(*) FROM reports WHERE request_id = ANY(:ids) "
                    "GROUP BY request_id"
                ),
                {"ids": ids},
            ).all()
    finally:
        engine.dispose()
    return {str(r[0]): int(r[1]) for r in rows}


def test_a_replica_killed_mid_load_is_restarted_and_no_report_is_lost_or_twice(
    fleet: Fleet,
) -> None:
    before = fleet.cluster.replicas()
    assert len(before) == 2
    rss = replica_rss_mib(fleet.cluster)
    print(f"\nreplica RSS (MiB): {', '.join(f'{v:.0f}' for v in rss.values())}")
    victim = before[0]
    body = SAMPLE_JSON.read_bytes()
    with fleet.client() as c:
        seen_before = {_decode(c).headers["x-replica"] for _ in range(4)}

    outcomes: dict[str, str] = {}  # request id → "200" or what the last try got instead
    retried: dict[str, list[str]] = {}  # request id → what its failed tries got
    lock = threading.Lock()
    acked = threading.Event()
    per_thread = 20

    def load() -> None:
        with fleet.client() as c:
            for _ in range(per_thread):
                rid = str(uuid.uuid4())
                got, failed = post_retrying(c, "/v1/decode", body, {**JSON, "X-Request-Id": rid})
                with lock:
                    outcomes[rid] = str(got.status_code) if got else failed[-1]
                    if failed:
                        retried[rid] = failed
                    if sum(s == "200" for s in outcomes.values()) >= 10:
                        acked.set()

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    assert acked.wait(120), "no 10 decodes acknowledged under load"
    os.kill(victim, signal.SIGKILL)  # mid-load: requests are in flight on both replicas
    killed_at = time.monotonic()
    for t in threads:
        t.join()

    # Ray restarts it: two replicas again, the new one answering
    restarted = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        now = fleet.cluster.replicas()
        if len(now) == 2 and victim not in now:
            with fleet.client() as c:
                names = {_decode(c).headers.get("x-replica") for _ in range(6)}
            if names - seen_before:
                restarted = time.monotonic() - killed_at
                break
        time.sleep(1)
    assert restarted is not None, "Ray did not restart the killed replica"

    ids = list(outcomes)
    ok = [rid for rid, s in outcomes.items() if s == "200"]
    deadline = time.monotonic() + 30  # a spooled report is adopted by a live replica
    while time.monotonic() < deadline and not set(ok) <= set(_stored(fleet.database, ok)):
        time.sleep(1)
    stored = _stored(fleet.database, ids)
    failed: dict[str, int] = {}
    for s in outcomes.values():
        if s != "200":
            failed[s] = failed.get(s, 0) + 1
    twice = {rid: n for rid, n in stored.items() if n > 1}
    lost = [rid for rid in ok if rid not in stored]
    first_tries: dict[str, int] = {}
    for tries in retried.values():
        for s in tries:
            first_tries[s] = first_tries.get(s, 0) + 1
    print(
        f"replica kill: {len(ids)} sent, {len(ok)} acknowledged, {sum(failed.values())} not "
        f"({json.dumps(failed)}); {len(retried)} retried under their request id "
        f"(failed tries: {json.dumps(first_tries)}); {len(stored)} stored, {len(twice)} "
        f"duplicated, {len(lost)} lost; restarted and answering {restarted:.0f} s after the kill"
    )
    assert not failed, f"decodes that failed every retry: {failed}"
    assert not lost, f"acknowledged decodes with no report: {lost}"
    assert not twice, f"reports stored twice: {twice}"


def test_the_serve_run_config_of_the_docs_deploys(fleet: Fleet, tmp_path: Path) -> None:
    """docs/examples/ray-serve.yaml, its runtime env pointed at this test's store and folders
    (and its proxy port at the cluster's), deployed with ``serve run`` and decoding."""
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    app = config["applications"][0]
    assert app["import_path"] == "wai_dispatch.service.rayserve.deployment:build"
    app["runtime_env"]["env_vars"] = {**app["runtime_env"]["env_vars"], **fleet.env}
    config["http_options"]["port"] = fleet.cluster.proxy_port
    path = tmp_path / "ray-serve.yaml"
    path.write_text(yaml.safe_dump(config))
    serve = Path(sys.executable).with_name("serve")
    done = subprocess.run(
        [str(serve), "run", "--address", fleet.cluster.address, "--non-blocking", str(path)],
        env={**fleet.cluster.env, **fleet.env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    deadline = time.monotonic() + 120
    got = None
    while time.monotonic() < deadline:
        with fleet.client() as c:
            got = _decode(c)
        if got.status_code == 200:
            break
        time.sleep(1)
    assert got is not None and got.status_code == 200, got.text if got else None
    assert got.headers["x-replica"].startswith("ray-")
