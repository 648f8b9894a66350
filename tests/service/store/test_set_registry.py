"""The set registry's tables (service/store/setregistry.py) on SQLite and PostgreSQL: a set's
archive is the same bytes from any replica's copy and comes back whole from its chunks; a second
publish of a live set changes nothing; a removal is a tombstone that a publish clears; a set
over the registry's size bound is refused; the admin token file is ensured once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wai_dispatch.codec.sets import SetNotInstalled, SetStore, SetTooLarge, write_manifest
from wai_dispatch.service.store import setregistry
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.setregistry import SetRegistry, archive_of


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReportStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'reports.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    db = ReportStore(url)
    db.migrate()
    yield db
    db.dispose()


def _set(root: Path, size: int) -> Path:
    folder = root / "src"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(bytes(range(256)) * (size // 256))
    (folder / "wai-usage.json").write_text("{}\n")
    write_manifest(folder, name="big", capability="wai.neural.int_synth", version="1", facts={})
    return folder


def test_publish_fetch_remove_and_publish_again(
    store: ReportStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(setregistry, "CHUNK_BYTES", 100_000)  # several chunks
    source = _set(tmp_path, 300_000)
    one, two = SetStore(tmp_path / "one"), SetStore(tmp_path / "two")
    digest = one.install(source).digest
    assert two.install(source).digest == digest
    assert archive_of(one, digest) == archive_of(two, digest)  # the same bytes anywhere

    registry = SetRegistry(store)
    assert registry.publish(one, digest) is True
    assert registry.publish(two, digest) is False  # live already: nothing changes
    data = registry.archive(digest)
    assert data == archive_of(one, digest)
    entry = registry.live()[digest]
    assert (entry.name, entry.bundled, entry.removed_ms) == ("big", False, None)
    assert entry.archive_bytes == len(data) and len(data) > 3 * 100_000

    # fetched into a third cache from the registry's bytes: the same set
    archive = tmp_path / "fetched.tar"
    archive.write_bytes(data)
    assert SetStore(tmp_path / "three").install(archive).digest == digest

    assert registry.resolve(digest[:6]) == digest
    assert registry.set_default("wai.neural.int_synth", digest, replace=False) is True
    registry.remove(digest)
    assert registry.live() == {} and registry.defaults() == {}
    assert registry.entries()[0].removed_ms is not None
    with pytest.raises(SetNotInstalled):
        registry.remove(digest)
    assert registry.publish(two, digest) is True  # installed again: the tombstone cleared
    assert registry.live()[digest].removed_ms is None


def test_a_set_over_the_bound_is_refused(
    store: ReportStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(setregistry, "MAX_SET_BYTES", 10_000)
    local = SetStore(tmp_path / "one")
    digest = local.install(_set(tmp_path, 20_480)).digest
    with pytest.raises(SetTooLarge, match="at most 10,000"):
        SetRegistry(store).publish(local, digest)
    assert SetRegistry(store).entries() == []


def test_the_admin_token_file_is_ensured_once(store: ReportStore, tmp_path: Path) -> None:
    from wai_dispatch.service.store import bearer

    secret = tmp_path / "admin"
    secret.write_text("wai_the-fleet-secret\n")
    for _ in range(2):  # every replica's start
        assert bearer.ensure_admin(store, tmp_path / "data", secret) is None
    rows = bearer.listing(store)
    assert [(r["name"], r["role"], r["revoked"]) for r in rows] == [("admin", "admin", False)]
    assert not (tmp_path / "data" / "admin-token").exists()
    bearer.revoke(store, "admin")
    bearer.ensure_admin(store, tmp_path / "data", secret)  # revoked stays revoked
    assert [r["revoked"] for r in bearer.listing(store)] == [True]
    assert "not live (revoked)" in bearer.admin_note(store, secret)
    secret.write_text("")
    with pytest.raises(bearer.TokenError, match="not one line"):
        bearer.ensure_admin(store, tmp_path / "data", secret)
