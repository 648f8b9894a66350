"""Issue 29, item 4: the token snapshot on the shared volume. A replica that reads the store
writes it (hashes, names, roles; no secret; mode 0600; a MAC); a replica that cannot read the
store takes it only verified (its MAC, under the key of its own store) and recent
(``token_snapshot_max_age_s``), and answers a token it cannot check ``TokenStoreDown`` (503),
never ``None`` (401)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from wai_dispatch.service.store import bearer, bearer_snapshot
from wai_dispatch.service.store.report_store import ReportStore

KEY = bearer_snapshot.key("sqlite:///shared/reports.db")


def _down_store(tmp_path: Path) -> ReportStore:
    """A SQLite store whose folder cannot exist (a file stands where it would be): down."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_bytes(b"")
    return ReportStore(f"sqlite:///{blocker / 'reports.db'}")


@pytest.fixture
def written(report_store: ReportStore, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A snapshot written by a replica that read the store: a sink's and an admin's token."""
    secrets = {
        "sink": bearer.create(report_store, "edge-1", bearer.Role.sink),
        "admin": bearer.create(report_store, "root", bearer.Role.admin),
        "revoked": bearer.create(report_store, "old", bearer.Role.sink),
    }
    bearer.revoke(report_store, "old")
    path = tmp_path / "volume" / bearer_snapshot.FILE
    cache = bearer.TokenCache(report_store, snapshot=path, snapshot_key=KEY)
    assert cache.reload() and cache.source == "store"
    return path, secrets


def _fresh(tmp_path: Path, path: Path, *, key: bytes = KEY, age: float = 3600) -> bearer.TokenCache:
    cache = bearer.TokenCache(
        _down_store(tmp_path), snapshot=path, snapshot_key=key, snapshot_max_age_s=age
    )
    assert not cache.reload()
    return cache


def test_the_snapshot_holds_hashes_names_and_roles_only(
    written: tuple[Path, dict[str, str]],
) -> None:
    path, secrets = written
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert all(secret not in text for secret in secrets.values())
    doc = json.loads(text)
    assert sorted(doc) == ["format", "mac", "tokens", "written_ms"]
    assert sorted((r[1], r[2]) for r in doc["tokens"]) == [("edge-1", "sink"), ("root", "admin")]
    assert {r[0] for r in doc["tokens"]} == {
        bearer.digest(secrets["sink"]),
        bearer.digest(secrets["admin"]),
    }
    assert [p.name for p in path.parent.iterdir()] == [bearer_snapshot.FILE]  # no temporary left


def test_a_replica_started_in_an_outage_checks_tokens_against_it(
    written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, secrets = written
    cache = _fresh(tmp_path, path)
    assert cache.source == "snapshot"
    assert cache.lookup(secrets["sink"]) == bearer.Principal("edge-1", bearer.Role.sink)
    admin = cache.lookup(secrets["admin"])
    assert admin is not None and admin.role is bearer.Role.admin
    for unknown in (secrets["revoked"], "wai_not-a-token"):  # not in it: cannot be checked
        with pytest.raises(bearer.TokenStoreDown):
            cache.lookup(unknown)


@pytest.mark.parametrize(
    "damage",
    ["role raised", "hash added", "torn", "another store", "too old", "from the future"],
)
def test_a_snapshot_not_verified_or_not_recent_is_not_used(
    written: tuple[Path, dict[str, str]], tmp_path: Path, damage: str
) -> None:
    path, secrets = written
    key, age = KEY, 3600.0
    doc = json.loads(path.read_text())
    if damage == "role raised":
        doc["tokens"] = [[h, n, "admin"] for h, n, _ in doc["tokens"]]
        path.write_text(json.dumps(doc))
    elif damage == "hash added":
        doc["tokens"].append([bearer.digest("wai_forged"), "intruder", "admin"])
        path.write_text(json.dumps(doc))
    elif damage == "torn":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "another store":
        key = bearer_snapshot.key("postgresql://other/db")
    elif damage == "too old":
        age = 0.001
        rows = [tuple(r) for r in doc["tokens"]]
        bearer_snapshot.write(path, rows, KEY, now_ms=doc["written_ms"] - 10_000)
    elif damage == "from the future":
        rows = [tuple(r) for r in doc["tokens"]]
        bearer_snapshot.write(path, rows, KEY, now_ms=doc["written_ms"] + 3_600_000)
    cache = _fresh(tmp_path, path, key=key, age=age)
    assert cache.source is None
    for secret in (secrets["sink"], secrets["admin"], "wai_forged"):
        with pytest.raises(bearer.TokenStoreDown):
            cache.lookup(secret)


def test_no_snapshot_at_age_bound_zero(
    written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, secrets = written
    cache = _fresh(tmp_path, path, age=0)
    with pytest.raises(bearer.TokenStoreDown):
        cache.lookup(secrets["sink"])


def test_a_revocation_reaches_the_snapshot(
    report_store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, secrets = written
    writer = bearer.TokenCache(report_store, snapshot=path, snapshot_key=KEY)
    writer.reload()
    bearer.revoke(report_store, "edge-1")
    writer.reload()  # the view changed: written again
    cache = _fresh(tmp_path, path)
    with pytest.raises(bearer.TokenStoreDown):
        cache.lookup(secrets["sink"])
    assert cache.lookup(secrets["admin"]) is not None


def test_a_replica_cut_off_takes_a_newer_snapshot_than_its_view(
    report_store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Its own view is older than what the replicas that reach the store wrote since."""
    path, secrets = written
    cut_off = bearer.TokenCache(report_store, snapshot=path, snapshot_key=KEY)
    cut_off.reload()
    assert cut_off.lookup(secrets["sink"]) is not None
    bearer.revoke(report_store, "edge-1")
    bearer.TokenCache(report_store, snapshot=path, snapshot_key=KEY).reload()  # another replica
    cut_off.store = _down_store(tmp_path)
    assert not cut_off.reload()
    assert cut_off.source == "snapshot"
    with pytest.raises(bearer.TokenStoreDown):
        cut_off.lookup(secrets["sink"])
