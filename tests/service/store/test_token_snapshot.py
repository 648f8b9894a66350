"""The token snapshot on the shared volume (issue 29, item 4; issue 36, item 4). A replica
that reads the store writes it (hashes, names, roles, the revoked tokens' hashes; no secret;
mode 0600; a MAC under a key kept on the volume, never a constant); a replica that cannot read
the store takes it only verified and recent, refuses (``None``: 401) a token revoked there, and
answers a token it cannot check ``TokenStoreDown`` (503). The file is looked at before it is
read: a FIFO, a link to ``/dev/zero`` or a sparse 1 GiB file is refused without a read."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from wai_dispatch.service.store import bearer, bearer_snapshot
from wai_dispatch.service.store.report_store import ReportStore


def _down(tmp_path: Path, url: str) -> ReportStore:
    """A store that does not answer (a SQLite file where a folder cannot be), under ``url``:
    the same store as the writer's, down."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_bytes(b"")
    down = ReportStore(f"sqlite:///{blocker / 'reports.db'}")
    down.url = url
    return down


@pytest.fixture
def written(store: ReportStore, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A snapshot written by a replica that read the store: a sink's and an admin's token,
    and one revoked."""
    secrets = {
        "sink": bearer.create(store, "edge-1", bearer.Role.sink),
        "admin": bearer.create(store, "root", bearer.Role.admin),
        "revoked": bearer.create(store, "old", bearer.Role.sink),
    }
    bearer.revoke(store, "old")
    path = tmp_path / "volume" / bearer_snapshot.FILE
    cache = bearer.TokenCache(store, snapshot=path)
    assert cache.reload() and cache.source == "store"
    return path, secrets


def _fresh(tmp_path: Path, path: Path, url: str, *, age: float = 3600) -> bearer.TokenCache:
    cache = bearer.TokenCache(_down(tmp_path, url), snapshot=path, snapshot_max_age_s=age)
    assert not cache.reload()
    return cache


def test_the_snapshot_holds_hashes_names_and_roles_only(
    store: ReportStore, written: tuple[Path, dict[str, str]]
) -> None:
    path, secrets = written
    key = path.parent / bearer_snapshot.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.stat().st_mode) == 0o600  # the volume's own key, random
    assert len(key.read_text()) == 64 and key.read_text() not in path.read_text()
    text = path.read_text()
    assert all(secret not in text for secret in secrets.values())
    doc = json.loads(text)
    assert sorted(doc) == ["format", "mac", "revoked", "tokens", "written_ms"]
    assert sorted((r[1], r[2]) for r in doc["tokens"]) == [("edge-1", "sink"), ("root", "admin")]
    assert {r[0] for r in doc["tokens"]} == {
        bearer.digest(secrets["sink"]),
        bearer.digest(secrets["admin"]),
    }
    assert doc["revoked"] == [bearer.digest(secrets["revoked"])]
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == [bearer_snapshot.FILE, bearer_snapshot.KEY_FILE]  # no temporary left


def test_a_replica_started_in_an_outage_checks_tokens_against_it(
    store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, secrets = written
    cache = _fresh(tmp_path, path, store.url)
    assert cache.source == "snapshot"
    assert cache.lookup(secrets["sink"]) == bearer.Principal("edge-1", bearer.Role.sink)
    admin = cache.lookup(secrets["admin"])
    assert admin is not None and admin.role is bearer.Role.admin
    assert cache.lookup(secrets["revoked"]) is None  # revoked there: 401
    with pytest.raises(bearer.TokenStoreDown):  # not in it: cannot be checked
        cache.lookup("wai_not-a-token")


@pytest.mark.parametrize(
    "damage",
    [
        "role raised",
        "hash added",
        "revocation dropped",
        "torn",
        "another store",
        "another volume's key",
        "key readable by others",
        "too old",
        "from the future",
    ],
)
def test_a_snapshot_not_verified_or_not_recent_is_not_used(
    store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path, damage: str
) -> None:
    path, secrets = written
    url, age = store.url, 3600.0
    doc = json.loads(path.read_text())
    rows = [tuple(r) for r in doc["tokens"]]
    if damage == "role raised":
        doc["tokens"] = [[h, n, "admin"] for h, n, _ in doc["tokens"]]
    elif damage == "hash added":
        doc["tokens"].append([bearer.digest("wai_forged"), "intruder", "admin"])
    elif damage == "revocation dropped":
        doc["revoked"] = []
    path.write_text(json.dumps(doc))
    if damage == "torn":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "another store":
        url = "postgresql://other/db"
    elif damage == "another volume's key":
        (path.parent / bearer_snapshot.KEY_FILE).write_text("ab" * 32)
    elif damage == "key readable by others":
        (path.parent / bearer_snapshot.KEY_FILE).chmod(0o644)
    elif damage == "too old":
        age = 0.001
        bearer_snapshot.write(path, rows, set(doc["revoked"]), url, now_ms=doc["written_ms"] + 1)
    elif damage == "from the future":
        path.unlink()
        bearer_snapshot.write(path, rows, set(), url, now_ms=doc["written_ms"] + 3_600_000)
    cache = _fresh(tmp_path, path, url, age=age)
    assert cache.source is None
    for secret in (secrets["sink"], secrets["admin"], secrets["revoked"], "wai_forged"):
        with pytest.raises(bearer.TokenStoreDown):
            cache.lookup(secret)


def test_no_snapshot_at_age_bound_zero(
    store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, secrets = written
    cache = _fresh(tmp_path, path, store.url, age=0)
    with pytest.raises(bearer.TokenStoreDown):
        cache.lookup(secrets["sink"])


def test_a_revocation_reaches_the_snapshot(
    store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, secrets = written
    writer = bearer.TokenCache(store, snapshot=path)
    writer.reload()
    bearer.revoke(store, "edge-1")
    writer.reload()  # the view changed: written again
    cache = _fresh(tmp_path, path, store.url)
    assert cache.lookup(secrets["sink"]) is None
    assert cache.lookup(secrets["admin"]) is not None


def test_a_revocation_with_no_replica_running_reaches_it(
    store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """What ``wai-dispatch tokens revoke`` does (tests/service/http/test_service_outage.py
    runs the command itself): no replica reads the store, the store then stops."""
    path, secrets = written
    bearer.revoke(store, "edge-1")
    assert bearer.rewrite_snapshot(store, path) is None
    cache = _fresh(tmp_path, path, store.url)
    assert cache.lookup(secrets["sink"]) is None
    assert cache.lookup(secrets["admin"]) is not None
    gone = tmp_path / "not-mounted" / bearer_snapshot.FILE
    assert "is not a folder here" in str(bearer.rewrite_snapshot(store, gone))


def test_a_snapshot_older_than_the_one_there_does_not_replace_it(
    store: ReportStore, written: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """A replica whose view was read before a revocation writes after the revoking command."""
    path, secrets = written
    doc = json.loads(path.read_text())
    before = {r[0]: (r[1], r[2]) for r in doc["tokens"]}
    bearer.revoke(store, "edge-1")
    assert bearer.rewrite_snapshot(store, path) is None
    stale = [(h, n, r) for h, (n, r) in before.items()]
    assert bearer_snapshot.write(path, stale, set(), store.url, now_ms=doc["written_ms"])
    cache = _fresh(tmp_path, path, store.url)
    assert cache.lookup(secrets["sink"]) is None


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with path.open("wb") as fh:
        fh.truncate(1 << 30)


@pytest.mark.parametrize("make", [_fifo, _dev_zero, _sparse], ids=["fifo", "dev-zero", "sparse"])
def test_a_special_or_oversize_file_is_refused_before_it_is_read(
    report_store: ReportStore, tmp_path: Path, make: object
) -> None:
    """Each answers at once (a FIFO with no writer would block an ``open`` or a read; a link
    to /dev/zero or a 1 GiB file would be read into memory), and no token is let in."""
    volume = tmp_path / "volume"
    secret = bearer.create(report_store, "edge-1", bearer.Role.sink)
    path = volume / bearer_snapshot.FILE
    bearer.TokenCache(report_store, snapshot=path).reload()
    path.unlink()
    assert callable(make)
    make(path)
    done: list[bearer.TokenCache] = []
    worker = threading.Thread(target=lambda: done.append(_fresh(tmp_path, path, report_store.url)))
    worker.start()
    worker.join(timeout=10)
    assert done, "reading the snapshot blocked"
    with pytest.raises(bearer.TokenStoreDown):
        done[0].lookup(secret)
    with pytest.raises(OSError, match=r"not a regular file|over|symbolic link|Too many levels"):
        bearer_snapshot.read_regular(path, bearer_snapshot.MAX_BYTES)
