"""Two replicas on one database (two apps in this process, each its own data directory, on one
SQLite file and on one PostgreSQL database): the set registry is their one truth (docs/sets.md).

A set installed or removed through either is seen by the other within ``sets_refresh_s`` plus
one sync (measured here against :data:`BOUND_S`); a removed bundled set stays removed across
restarts; a set the registry lists that a replica cannot verify is never used, and that
replica's ``/readyz`` says which until it can; with ``WAI_BUNDLED_SETS`` off the registry starts
empty. The admin token: created from any replica, or the ``WAI_ADMIN_TOKEN_FILE`` secret, and
every replica's banner says the same."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _svc import SAMPLE_JSON, InProcess
from sqlalchemy import update

from wai_dispatch.conformance import sets_dir as bundled_sets

#: The poll interval the replicas run with here.
REFRESH_S = 0.5
#: The bound a change must reach the other replica within: the poll interval, plus one sync
#: (a query, and for an install the fetch and check of a small set), plus scheduling slack on
#: a loaded 2-core machine.
BOUND_S = REFRESH_S + 1.5
JSON = {"Content-Type": "application/json"}


@contextlib.contextmanager
def replica(data_dir: Path, url: str, **settings: Any) -> Iterator[InProcess]:
    """One replica: the app on ``url``'s database with its own data directory, its lifespan
    run; tokens created on its start (sink-a's, an operator's; admin: the one its first start
    wrote, else ``admin`` in ``settings``' place is given by the caller)."""
    from anyio.from_thread import start_blocking_portal

    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load
    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    admin = settings.pop("admin", None)
    settings.setdefault("warm", False)  # readiness here is the registry's, not the warming's
    chosen = load(
        data_dir=data_dir, port=8000, database_url=url, sets_refresh_s=REFRESH_S, **settings
    )
    store = ReportStore(chosen.url)
    store.migrate()
    made = {"sink": bearer.create(store, "sink-a", bearer.Role.sink)}
    store.dispose()
    app = create_app(chosen)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):
        written = data_dir / "admin-token"
        made["admin"] = admin or (written.read_text().strip() if written.exists() else "")
        yield InProcess(app, made, portal)


def _cached(svc: InProcess) -> set[str]:
    return {e.digest for e in svc.service.decoder.set_store.list()}


def _within(check: Callable[[], bool], bound: float) -> float:
    """Seconds until ``check()`` holds (polled every 20 ms); fails past ``bound``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < bound, f"not seen within {bound} s"
        time.sleep(0.02)
    return time.monotonic() - start


def _small_set(root: Path, name: str) -> Path:
    from wai_dispatch.codec.sets import write_manifest

    folder = root / name
    folder.mkdir()
    (folder / "notes.txt").write_text(f"the set {name}\n")
    (folder / "wai-usage.json").write_text("{}\n")
    write_manifest(folder, name=name, capability="wai.neural.int_synth", version="1", facts={})
    return folder


def _tgz(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buf.getvalue()


def _decode(svc: InProcess) -> tuple[int, str | None]:
    with svc.client() as c:
        r = c.post("/v1/decode", content=SAMPLE_JSON.read_bytes(), headers=JSON)
    return r.status_code, (r.json().get("error") or {}).get("code")


def _sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'shared' / 'reports.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return _sqlite_url(tmp_path)
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.mark.slow
def test_an_install_and_a_removal_reach_every_replica_within_the_bound(
    tmp_path: Path, database: str
) -> None:
    sample_set = json.loads(SAMPLE_JSON.read_bytes())["set"]
    with replica(tmp_path / "a", database) as a, replica(tmp_path / "b", database) as b:
        b.tokens["admin"] = a.tokens["admin"]  # the one token A's first start wrote
        # the bundled sets: put into the registry by the first start, fetched by the second
        assert _cached(a) == _cached(b) and sample_set in _cached(b) and len(_cached(b)) == 3
        assert _decode(a) == _decode(b) == (200, None)

        # a set posted to A: B has it within the bound, fetched by digest and verified
        folder = _small_set(tmp_path, "fleet-one")
        with a.client("admin") as c:
            r = c.post(
                "/v1/sets", content=_tgz(folder), headers={"Content-Type": "application/gzip"}
            )
        assert r.status_code == 200, r.text
        digest = r.json()["digest"]
        seen = _within(lambda: digest in _cached(b), BOUND_S)
        with b.client() as c:
            assert c.get(f"/v1/sets/{digest}").json()["name"] == "fleet-one"

        # the sample's set removed through B: A refuses it within the bound, as B does at once
        with b.client("admin") as c:
            assert c.delete(f"/v1/sets/{sample_set}").json() == {"removed": sample_set}
        gone = _within(lambda: sample_set not in _cached(a), BOUND_S)
        refused = _decode(b)
        assert refused[0] in (404, 422) and refused[1] == "set_not_installed", refused
        assert _decode(a) == refused
        for svc in (a, b):
            with svc.client() as c:
                listed = {s["digest"] for s in c.get("/v1/sets").json()["sets"]}
            assert sample_set not in listed and digest in listed
            assert svc.service.decoder.sets.get(sample_set) is None  # no opened copy kept
    print(f"\npropagation ({database.split(':')[0]}): install {seen:.2f} s, removal {gone:.2f} s")

    # restarted (bundled sets on): the removed bundled set stays removed on both
    with replica(tmp_path / "a", database) as a, replica(tmp_path / "b", database) as b:
        for svc in (a, b):
            assert sample_set not in _cached(svc) and digest in _cached(svc)
            with svc.client() as c:
                assert c.get("/readyz").status_code == 200
        assert _decode(a) == refused
        # installed again (the bundled folder, posted): back on both
        with a.client("admin") as c:
            body = _tgz(Path(bundled_sets()) / "bmshj2018-demo-q3")
            r = c.post("/v1/sets", content=body, headers={"Content-Type": "application/gzip"})
        assert r.status_code == 200 and r.json()["digest"] == sample_set
        _within(lambda: sample_set in _cached(b), BOUND_S)
        assert _decode(b) == (200, None)


def test_a_set_that_does_not_verify_is_never_used_and_readyz_says_so(
    tmp_path: Path, database: str
) -> None:
    from wai_dispatch.service.store.models import SetChunkRow

    with replica(tmp_path / "a", database) as a:
        folder = _small_set(tmp_path, "tampered")
        sets_a = a.service.sets
        digest = sets_a.install(folder)
        engine = a.service.report_store.engine
        good = sets_a.registry.archive(digest)
        bad = good.replace(b"the set tampered", b"the set TAMPERED")
        assert len(bad) == len(good) and bad != good
        with engine.begin() as conn:  # the registry's bytes changed under the digest
            conn.execute(update(SetChunkRow).where(SetChunkRow.digest == digest).values(data=bad))
        with replica(tmp_path / "b", database) as b:
            assert digest not in _cached(b)  # refused: notes.txt is not the manifest's
            assert b.service.sets.state.problems[digest].code == "set_file_mismatch"
            with b.client() as c:
                r = c.get("/readyz")
                assert r.status_code == 503 and r.json()["missing_sets"] == [digest]
                assert c.get(f"/v1/sets/{digest}").json()["error"]["code"] == "set_not_installed"
            with engine.begin() as conn:  # the bytes mended: B fetches it at its next sync
                conn.execute(
                    update(SetChunkRow).where(SetChunkRow.digest == digest).values(data=good)
                )
            _within(lambda: digest in _cached(b), BOUND_S)
            with b.client() as c:
                assert c.get("/readyz").status_code == 200


def test_bundled_sets_are_registered_by_reference_and_a_second_replica_installs_them(
    tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import func, select

    from wai_dispatch.service.store import setsync
    from wai_dispatch.service.store.models import SetChunkRow, SetRow

    with replica(tmp_path / "a", database) as a:
        engine = a.service.report_store.engine
        with engine.connect() as conn:
            rows = conn.execute(select(SetRow.digest, SetRow.bundled, SetRow.chunks)).all()
            held = conn.execute(select(func.count()).select_from(SetChunkRow)).scalar_one()
        assert len(rows) == 3 and all(bundled and chunks == 0 for _, bundled, chunks in rows)
        assert held == 0  # no bytes of a bundled set in the database
        digests = {d for d, _, _ in rows}
        with replica(tmp_path / "b", database, bundled_sets=False) as b:  # from the package
            assert _cached(b) == digests == _cached(a)
            assert _decode(b) == (200, None)
        # a replica whose package lacks them (another version): typed, not a crash
        empty = tmp_path / "no-bundled"
        empty.mkdir()
        monkeypatch.setattr(setsync, "sets_dir", lambda: empty)
        with replica(tmp_path / "c", database, bundled_sets=False) as c:
            assert _cached(c) == set()
            problems = c.service.sets.state.problems
            assert set(problems) == digests
            assert {p.code for p in problems.values()} == {"set_not_installed"}
            with c.client() as client:
                r = client.get("/readyz")
                assert r.status_code == 503 and set(r.json()["missing_sets"]) == digests


def test_without_bundled_sets_the_registry_starts_empty(tmp_path: Path) -> None:
    url = _sqlite_url(tmp_path)
    with replica(tmp_path / "a", url, bundled_sets=False) as a:
        assert _cached(a) == set() and a.service.sets.registry.entries() == []
        with a.client() as c:
            ready = c.get("/readyz")
        assert ready.status_code == 200, "ready: it decodes every set the registry lists (none)"
        assert ready.json()["registry_sets"] == 0
        assert _decode(a)[1] == "set_not_installed"
    # the same database, bundled sets on: they come in once, and a later start with them off
    # does not take them away
    with replica(tmp_path / "a", url) as a:
        assert len(_cached(a)) == 3
    with replica(tmp_path / "b", url, bundled_sets=False) as b:
        assert len(_cached(b)) == 3


def test_admin_token_file_is_ensured_on_every_replica_and_the_banners_agree(
    tmp_path: Path, database: str
) -> None:
    from wai_dispatch.cli.serve import banner
    from wai_dispatch.service.settings import load

    secret_file = tmp_path / "secret" / "admin"
    secret_file.parent.mkdir()
    secret_file.write_text("wai_mounted-secret-of-the-fleet\n")
    common = {"database_url": database, "admin_token_file": secret_file, "port": 8000}
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with (
        replica(a_dir, database, admin_token_file=secret_file, admin="x") as a,
        replica(b_dir, database, admin_token_file=secret_file, admin="x") as b,
    ):
        for svc in (a, b):
            svc.tokens["admin"] = "wai_mounted-secret-of-the-fleet"
            with svc.client("admin") as c:  # admin on both: a missing set, not 401/403
                r = c.delete("/v1/sets/" + "0" * 64)
            assert r.json()["error"]["code"] == "set_not_installed"
        assert not (a_dir / "admin-token").exists() and not (b_dir / "admin-token").exists()
    lines_a = banner(load(data_dir=a_dir, **common))
    lines_b = banner(load(data_dir=b_dir, **common))
    assert lines_a == lines_b
    assert lines_a[1] == (
        f"admin token: the one in {secret_file} (WAI_ADMIN_TOKEN_FILE), live in the token table"
    )
    assert f"$(cat {secret_file})" in lines_a[-1]


def test_without_a_token_file_every_banner_names_the_database_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from wai_dispatch.cli.main import main
    from wai_dispatch.cli.serve import banner
    from wai_dispatch.service.settings import load

    url = _sqlite_url(tmp_path)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    first = banner(load(data_dir=a_dir, database_url=url))  # A's first start writes one
    second = banner(load(data_dir=b_dir, database_url=url))  # B: none written, one exists
    note = "(`wai-dispatch tokens list`; another: `wai-dispatch tokens create NAME --role admin`)"
    assert first[1] == second[1] == f"admin token: 1 live in the token table {note}"
    assert first[2] == f"admin token written to {a_dir / 'admin-token'} (mode 0600; first start)"
    assert not any("create one" in line for line in second)
    # an admin token created on B's side (the CLI, against the database) is honoured by A
    monkeypatch.setenv("WAI_DATABASE_URL", url)
    base = ["--data-dir", str(b_dir), "--json"]
    assert main(["tokens", "create", "ops-b", "--role", "admin", *base]) == 0
    made = json.loads(capsys.readouterr().out)["token"]
    monkeypatch.delenv("WAI_DATABASE_URL")
    with replica(a_dir, url, admin=made) as a:
        with a.client("admin") as c:
            r = c.delete("/v1/sets/" + "0" * 64)
        assert r.json()["error"]["code"] == "set_not_installed"
    third = banner(load(data_dir=b_dir, database_url=url))
    assert third[1] == f"admin token: 2 live in the token table {note}"


def test_a_set_of_an_unknown_capability_is_refused_on_every_store(
    tmp_path: Path, database: str
) -> None:
    """POSTed to a replica, a set whose capability this build does not know is a 422
    ``unknown_capability``: the registry does not list it, no replica caches it, and readiness
    is unchanged (it never reached the registry)."""
    from wai_dispatch.codec.sets import write_manifest

    folder = tmp_path / "bogus"
    folder.mkdir()
    (folder / "wai-usage.json").write_text("{}\n")
    write_manifest(folder, name="bogus", capability="wai.neural.bogus", version="1", facts={})
    with replica(tmp_path / "a", database) as a:
        before = _cached(a)
        with a.client("admin") as c:
            r = c.post(
                "/v1/sets", content=_tgz(folder), headers={"Content-Type": "application/gzip"}
            )
            assert r.status_code == 422, r.text
            assert r.json()["error"]["code"] == "unknown_capability"
            assert "wai.neural.bogus" in r.json()["error"]["message"]
            listed = c.get("/v1/sets").json()["sets"]
            assert all(s["capability"] != "wai.neural.bogus" for s in listed)
            assert c.get("/readyz").status_code == 200
        assert _cached(a) == before
