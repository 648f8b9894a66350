"""The spool volume: a folder per replica, and the adoption of a dead replica's spool by any
replica on the same volume, every acknowledged report stored exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _svc import SAMPLE_JSON, free_port, pg_bin, private_cluster
from sqlalchemy import create_engine, text

from wai_dispatch.service.store.spool import Spool
from wai_dispatch.service.store.spool_volume import SpoolVolume, default_replica_id

MiB = 1 << 20


def _line(ids: list[str]) -> list[dict[str, Any]]:
    return [{"id": i} for i in ids]


def _collect(into: list[str]) -> Any:
    def insert(batch: list[dict[str, Any]]) -> int:
        into.extend(obj["id"] for obj in batch)
        return len(batch)

    return insert


def test_a_live_replicas_spool_is_never_adopted(tmp_path: Path) -> None:
    a = SpoolVolume(tmp_path, "a", MiB)
    b = SpoolVolume(tmp_path, "b", MiB)
    a.own.append(_line(["r1", "r2"]))
    got: list[str] = []
    assert b.orphans() == []
    assert b.adopt(_collect(got)) == 0 and got == []
    assert a.own.size() > 0  # untouched while a lives
    a.close()
    b.close()


def test_a_dead_replicas_spool_is_adopted_once(tmp_path: Path) -> None:
    a = SpoolVolume(tmp_path, "a", MiB)
    a.own.append(_line(["r1", "r2"]))
    a.own.append(_line(["r3"]))
    a.close()  # the owner lock goes with the process, as with SIGKILL
    b = SpoolVolume(tmp_path, "b", MiB)
    c = SpoolVolume(tmp_path, "c", MiB)
    got: list[str] = []
    assert b.orphans() == [tmp_path / "a"]
    assert b.adopt(_collect(got)) == 3
    assert c.adopt(_collect(got)) == 0  # nothing left for a second adopter
    assert got == ["r1", "r2", "r3"]
    assert not any(f.stat().st_size for f in (tmp_path / "a").glob("reports*.jsonl"))
    # the dead replica, back under its id, finds nothing to replay and writes on
    a2 = SpoolVolume(tmp_path, "a", MiB)
    assert a2.own.size() == 0
    a2.own.append(_line(["r4"]))
    assert b.orphans() == []
    for v in (a2, b, c):
        v.close()


def test_an_adoption_that_fails_keeps_the_orphan_whole(tmp_path: Path) -> None:
    a = SpoolVolume(tmp_path, "a", MiB)
    a.own.append(_line(["r1"]))
    a.close()
    b = SpoolVolume(tmp_path, "b", MiB)

    def down(batch: list[dict[str, Any]]) -> int:
        raise ConnectionError("store down")

    with pytest.raises(ConnectionError):
        b.adopt(down)
    got: list[str] = []
    assert b.adopt(_collect(got)) == 1 and got == ["r1"]
    b.close()


def test_a_spool_of_the_old_layout_is_adopted(tmp_path: Path) -> None:
    """Before replica folders, the spool's files sat at the top of ``<data_dir>/spool``."""
    old = Spool(tmp_path, MiB, owned=False)
    old.append(_line(["old1"]))
    old.close()
    b = SpoolVolume(tmp_path, "b", MiB)
    got: list[str] = []
    assert b.adopt(_collect(got)) == 1 and got == ["old1"]
    b.close()


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a b"])
def test_a_replica_id_is_a_plain_folder_name(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="replica id"):
        SpoolVolume(tmp_path, bad, MiB)


def test_the_default_replica_id_is_a_folder_name() -> None:
    rid = default_replica_id()
    assert rid and "/" not in rid and rid.strip(".")


def _replica(data: Path, volume: Path, rid: str, db: str, port: int) -> subprocess.Popen[bytes]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WAI_")},
        "WAI_DATA_DIR": str(data),
        "WAI_DATABASE_URL": db,
        "WAI_SPOOL_DIR": str(volume),
        "WAI_REPLICA_ID": rid,
        "WAI_PORT": str(port),
        "WAI_DECODE_THREADS": "1",
    }
    cmd = [sys.executable, "-m", "wai_dispatch", "serve"]
    with (data.parent / f"{rid}.log").open("wb") as log:  # the child keeps its own copy
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the replica exited {proc.returncode} (see its .log)")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the replica did not start")


@pytest.mark.postgres  # a private cluster of its own, stopped and started mid-run
@pytest.mark.slow
@pytest.mark.skipif(pg_bin("initdb") is None or pg_bin("pg_ctl") is None, reason="no initdb/pg_ctl")
def test_a_killed_replicas_spool_is_replayed_by_another(tmp_path: Path) -> None:
    """A replica SIGKILLed with reports spooled (PostgreSQL down) leaves its spool on the
    volume; a second replica started on the volume adopts it when PostgreSQL returns: every
    acknowledged report stored exactly once."""
    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    volume = tmp_path / "volume"
    with private_cluster() as cluster:
        url = "postgresql+psycopg://" + cluster.url.split("://", 1)[1]
        store = ReportStore(url)
        store.migrate()
        secret = bearer.create(store, "sink-a", bearer.Role.sink)
        store.dispose()
        port_a = free_port()
        a = _replica(tmp_path / "a", volume, "a", url, port_a)
        b: subprocess.Popen[bytes] | None = None
        try:
            base = f"http://127.0.0.1:{port_a}"
            _wait_ready(base, a)
            headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
            body = SAMPLE_JSON.read_bytes()
            acked: list[str] = []
            with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
                r = c.post("/v1/decode", content=body)  # warm, stored straight away
                assert r.status_code == 200, r.text
                acked += r.json()["report_ids"]
                cluster.stop()
                for _ in range(5):
                    r = c.post("/v1/decode", content=body)
                    assert r.status_code == 200, r.text
                    acked += r.json()["report_ids"]
            a.send_signal(signal.SIGKILL)
            a.wait(timeout=30)
            spooled = [
                json.loads(line)
                for f in sorted((volume / "a").glob("reports*.jsonl"))
                for line in f.read_bytes().splitlines()
            ]
            assert len(spooled) == 5  # the five decodes' lines, left on the volume

            port_b = free_port()
            b = _replica(tmp_path / "b", volume, "b", url, port_b)  # the store still down
            _wait_ready(f"http://127.0.0.1:{port_b}", b)
            cluster.start()
            engine = create_engine(url)
            deadline = time.monotonic() + 90
            rows: dict[str, int] = {}
            while time.monotonic() < deadline:
                with engine.connect() as conn:
                    got = conn.execute(text("SELECT id, count(*) FROM reports GROUP BY id"))
                    rows = {r[0]: r[1] for r in got}
                if set(acked) <= set(rows):
                    break
                time.sleep(0.3)
            time.sleep(2.5)  # one more adoption round: nothing is stored twice
            with engine.connect() as conn:
                total = conn.execute(text("SELECT count(*) FROM reports")).scalar_one()
            engine.dispose()
            assert len(set(acked)) == len(acked) == 6
            assert set(acked) <= set(rows)  # every acknowledged report is there…
            assert total == len(acked)  # …exactly once
            assert not any(f.stat().st_size for f in (volume / "a").glob("reports*.jsonl"))
        finally:
            for proc in (a, b):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=30)
