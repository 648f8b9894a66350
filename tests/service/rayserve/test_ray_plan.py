"""``serve --ray`` without a cluster (the default suite; well under a second each): the replica
plan and the deployment's options, the replica's id and its answer header, and the command's
typed refusals — no ray extra (``ray_missing``, the install line), Ray's flags without
``--ray``, more than one replica on SQLite (``store_not_shared``), a plan that does not hold,
an address where no cluster answers (``ray_unreachable``)."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from wai_dispatch.cli.main import main
from wai_dispatch.service.rayserve.deployment import ReplicaHeader, replica_id_of
from wai_dispatch.service.rayserve.plan import (
    Plan,
    PlanInvalid,
    StoreNotShared,
    check_store,
    placement_problem,
    warn_unplaceable,
)
from wai_dispatch.service.settings import load
from wai_dispatch.tools.ray_cluster import post_retrying


def test_a_fixed_plan_and_an_autoscaled_one_are_serve_s_options() -> None:
    assert Plan(replicas=3).options() == {
        "num_replicas": 3,
        "max_ongoing_requests": 16,
        "ray_actor_options": {"num_cpus": 1.0},
    }
    scaled = Plan.from_args({"autoscale": "1:4", "target_ongoing_requests": 3, "replica_cpus": 2})
    assert scaled.options() == {
        "autoscaling_config": {
            "min_replicas": 1,
            "max_replicas": 4,
            "target_ongoing_requests": 3,
            # the burst's timings (service/rayserve/plan.py), not Serve's 10/30/30/600 s
            "metrics_interval_s": 1.0,
            "look_back_period_s": 5.0,
            "upscale_delay_s": 3.0,
            "downscale_delay_s": 60.0,
        },
        "max_ongoing_requests": 16,
        "ray_actor_options": {"num_cpus": 2},
    }
    assert scaled.most == 4 and scaled.threads() == 2 and Plan(replica_cpus=0.5).threads() == 1
    assert Plan.from_args(scaled.to_args()) == scaled


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ({"replicas": 0}, "replicas: 0"),
        ({"autoscale": "3:1"}, "autoscale: 3:1"),
        ({"autoscale": "two"}, "MIN:MAX"),
        ({"replica_cpus": 0}, "replica_cpus"),
        ({"replicaz": 2}, "unknown argument(s) replicaz"),
        ({"upscale_delay_s": -1}, "upscale_delay_s: 0 or more"),
        ({"metrics_interval_s": 0}, "metrics_interval_s: above 0"),
    ],
)
def test_a_plan_that_does_not_hold_is_refused_by_name(args: dict[str, object], names: str) -> None:
    with pytest.raises(PlanInvalid, match=r".") as caught:
        Plan.from_args(args)
    assert names in caught.value.message and caught.value.code == "settings_invalid"


def test_more_than_one_replica_on_sqlite_is_refused(tmp_path: Path) -> None:
    sqlite = load(data_dir=tmp_path)
    check_store(sqlite, Plan(replicas=1))  # one replica may keep SQLite
    for plan in (Plan(replicas=2), Plan(autoscale=(1, 2))):
        with pytest.raises(StoreNotShared) as caught:
            check_store(sqlite, plan)
        assert caught.value.code == "store_not_shared" and "PostgreSQL" in caught.value.message
    check_store(load(data_dir=tmp_path, database_url="postgresql://db/wai"), Plan(replicas=8))


def test_max_replicas_the_cluster_cannot_place_is_named() -> None:
    """The issue's case: ``--autoscale 1:3`` at one CPU each on a cluster of two."""
    assert placement_problem(Plan(autoscale=(1, 2)), 2.0) is None
    assert placement_problem(Plan(autoscale=(1, 4), replica_cpus=0.5), 2.0) is None
    problem = placement_problem(Plan(autoscale=(1, 3)), 2.0)
    assert problem is not None
    assert "max_replicas 3 × num_cpus 1 = 3 CPUs" in problem and "has 2" in problem
    assert "2 replica(s) can be placed" in problem and "UPSCALING" in problem
    fixed = placement_problem(Plan(replicas=3, replica_cpus=1.5), 4.0)
    assert fixed is not None and "replicas 3" in fixed and "2 replica(s)" in fixed


def test_the_connected_cluster_s_cpus_are_checked_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ray = pytest.importorskip("ray", reason="the ray extra")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    assert warn_unplaceable(Plan(autoscale=(1, 3))) is None  # not connected: nothing to check
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0, "memory": 1e9})
    logger = "wai_dispatch.rayserve"
    monkeypatch.setattr(logging.getLogger(logger), "propagate", True)
    with caplog.at_level("WARNING", logger=logger):
        assert warn_unplaceable(Plan(autoscale=(1, 2))) is None
        assert not caplog.records
        problem = warn_unplaceable(Plan(autoscale=(1, 3)))
    assert problem is not None
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [problem]


def test_the_replica_id_is_a_spool_folder_name() -> None:
    assert replica_id_of("oqm3poz3") == "ray-oqm3poz3"
    assert replica_id_of("a/b c..") == "ray-a_b_c"
    assert replica_id_of("..") == "ray-replica"


async def _ok() -> dict[str, str]:
    return {"ok": "yes"}


@pytest.mark.anyio
async def test_every_answer_names_its_replica() -> None:
    app = FastAPI()
    app.get("/x")(_ok)
    app.add_middleware(ReplicaHeader, replica="ray-abc")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        for path in ("/x", "/missing"):
            assert (await c.get(path)).headers["x-replica"] == "ray-abc"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    return status, capsys.readouterr().err.strip()


def test_serve_ray_without_the_extra_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as without the extra
    status, err = _run(["serve", "--ray", "127.0.0.1:6379", "--data-dir", str(tmp_path)], capsys)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("wai-dispatch: error: ray_missing: ")
    assert "pip install 'wai-dispatch[ray]'" in err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--replicas", "2"], "--replicas"),
        (["--autoscale", "1:2"], "--autoscale"),
        (["--detach"], "--detach"),
    ],
)
def test_ray_s_flags_without_ray_are_refused(
    flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _run(["serve", *flags, "--data-dir", str(tmp_path)], capsys)
    assert status == 2 and err.startswith("wai-dispatch: error: invalid_argument: " + named)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


@pytest.mark.parametrize(
    ("flags", "code", "exit"),
    [
        (["--replicas", "2"], "store_not_shared", 2),  # the default store is SQLite
        (["--autoscale", "4:2"], "settings_invalid", 2),
        (["--replicas", "1"], "ray_unreachable", 3),  # unavailable: what it needs does not answer
    ],
)
def test_serve_ray_refusals_are_one_typed_line(
    flags: list[str], code: str, exit: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray", reason="the ray extra: pip install 'wai-dispatch[ray]'")
    address = f"127.0.0.1:{_closed_port()}"
    status, err = _run(["serve", "--ray", address, *flags, "--data-dir", str(tmp_path)], capsys)
    assert status == exit and len(err.splitlines()) == 1, err
    assert err.startswith(f"wai-dispatch: error: {code}: "), err
    assert not (tmp_path / "reports.db").exists()  # refused before the store was touched


def test_a_client_retries_a_dead_replica_s_500_and_a_dropped_connection_under_one_id() -> None:
    """docs/ray.md's client: Serve's 500 for a decode in flight on a killed replica, then a
    dropped connection, then the answer; every try under the same ``X-Request-Id``. The
    service's own refusals (a 4xx) are answers, not retried; a request that fails every try
    comes back as ``None`` with what each try got."""
    tries: list[str] = []
    script = iter([500, "drop", 200, 422, 503, 503])

    def answer(request: httpx.Request) -> httpx.Response:
        tries.append(request.headers["x-request-id"])
        step = next(script)
        if step == "drop":
            raise httpx.ReadError("connection dropped", request=request)
        return httpx.Response(int(step), text="Internal Server Error")

    with httpx.Client(transport=httpx.MockTransport(answer), base_url="http://ray") as c:
        got, failed = post_retrying(c, "/v1/decode", b"{}", {"X-Request-Id": "r1"}, pause_s=0)
        assert got is not None and got.status_code == 200
        assert failed == ["500", "ReadError"] and tries == ["r1"] * 3
        refused, failed = post_retrying(c, "/v1/decode", b"{}", {}, pause_s=0)
        assert refused is not None and refused.status_code == 422 and failed == []
        tries.clear()
        gone, failed = post_retrying(c, "/v1/decode", b"{}", {}, attempts=2, pause_s=0)
    assert gone is None and failed == ["503", "503"]
    assert len(set(tries)) == 1  # a fresh id when none is given, the same on every try
