"""Faults by construction (issue 16, item 7), each checking that every acknowledged report is
stored exactly once: a spool append is all or nothing under ENOSPC and short writes (injected
into the spool module's ``os.write``); replay drains in batches while new lines keep landing
and nothing is refused once the store is back; a locked SQLite spools at once instead of
stalling; the service starts while its store is down and migrates it when it returns."""

from __future__ import annotations

import errno
import itertools
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _svc import SAMPLE_JSON, InProcess, PortalClient, in_process
from sqlalchemy import text

from wai_dispatch.service.store import spool as spool_mod
from wai_dispatch.service.store.bearer import Role
from wai_dispatch.service.store.bearer import create as create_token
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.spool import (
    Spool,
    SpoolFull,
    SpoolWriteFailed,
)

T0 = 1_796_000_000_000


def _records(n: int = 2) -> list[ReportRecord]:
    out = []
    request_id = str(uuid.uuid4())  # one request's reports: each call is a request of its own
    for role in ("primary", "fallback")[:n]:
        out.append(
            ReportRecord.from_json(
                {
                    "id": str(uuid.uuid4()),
                    "request_id": request_id,
                    "created_ms": T0,
                    "sink": "a",
                    "role": role,
                    "capability": "wai.neural.bmshj2018",
                    "set_digest": "ab" * 32,
                    "symbols_digest": "cd" * 32,
                    "rgb_digest": "ef" * 32,
                    "needed": "none",
                    "path_ran": "cpu/onnx-runtime/float",
                    "tier": "none",
                    "outcome": "decoded",
                    "duration_ms": 1.0,
                    "placement": {"npu": 0, "gpu": 0, "cpu": 76, "unknown": 0},
                    "refusals": [],
                    "report": {"kind": "wai-neural-dispatch/1"},
                }
            )
        )
    return out


class FlakyStore(ReportStore):
    """A real SQLite store that can be switched down; counts its insert transactions."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.down = False
        self.transactions = 0
        self.delay_s = 0.0

    def _transaction(self) -> None:
        if self.down:
            raise StoreDown("switched down")
        time.sleep(self.delay_s)
        self.transactions += 1

    def insert(self, records: Any) -> int:  # the spool's replay
        self._transaction()
        return super().insert(records)

    def record(self, records: Any) -> list[str]:  # a decode's records
        self._transaction()
        return super().record(records)

    def ping(self) -> bool:
        return not self.down and super().ping()


def _stored_ids(store: ReportStore) -> list[str]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT id FROM reports"))]


def _wait(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _exactly_once(store: ReportStore, acked: list[str]) -> None:
    ids = _stored_ids(store)
    assert len(ids) == len(set(ids))  # no report twice
    assert sorted(ids) == sorted(acked)  # every acknowledged report, and only those


@pytest.fixture
def flaky(tmp_path: Path) -> FlakyStore:
    store = FlakyStore(f"sqlite:///{tmp_path / 'reports.db'}")
    store.migrate()
    return store


# -- 1. all or nothing -------------------------------------------------------------------------


def test_append_is_all_or_nothing_on_a_full_disk(
    flaky: FlakyStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store down, the disk fills mid-run: a write that comes up short, then ENOSPC; a
    write of 0 bytes; ENOSPC at fsync. Each failing append raises (the decode is refused) and
    leaves nothing behind; after space returns every acknowledged report is stored once."""
    spool = Spool(tmp_path / "spool", max_bytes=1 << 20)
    recorder = Recorder(flaky, spool, retry_s=0.05)
    flaky.down = True
    real_write, real_fsync = os.write, os.fsync
    mode = {"disk": "ok"}

    def write(fd: int, data: Any) -> int:
        if fd == spool._fd and mode["disk"] == "short-then-full":
            mode["disk"] = "full"
            return real_write(fd, bytes(data)[: len(data) // 2])  # half a line on disk
        if fd == spool._fd and mode["disk"] == "full":
            raise OSError(errno.ENOSPC, "No space left on device")
        if fd == spool._fd and mode["disk"] == "zero":
            return 0
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        if fd == spool._fd and mode["disk"] == "fsync":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(spool_mod.os, "write", write)
    monkeypatch.setattr(spool_mod.os, "fsync", fsync)
    acked: list[str] = []
    refused = 0
    faults = itertools.cycle(["ok", "short-then-full", "ok", "zero", "ok", "fsync", "ok"])
    for _ in range(200):
        mode["disk"] = next(faults)
        recs = _records()
        before = spool.size()
        try:
            recorder.record(recs)
        except SpoolWriteFailed as exc:
            refused += 1
            assert exc.code == "report_spool_failed"
            assert spool.size() == before  # no fragment stays
            assert spool.failed
            continue
        acked.extend(r.id for r in recs)
    assert refused == 86 and len(acked) == 2 * 114
    # every line on disk is whole: no acknowledged line can be joined to a fragment
    # (the replay thread may have moved the first lines to the file it drains)
    files = [tmp_path / "spool" / n for n in ("reports.draining.jsonl", "reports.jsonl")]
    data = b"".join(f.read_bytes() for f in files if f.exists())
    lines = data.split(b"\n")
    assert lines[-1] == b"" and len(lines) - 1 == 114
    monkeypatch.undo()
    flaky.down = False
    _wait(lambda: spool.size() == 0)
    recorder.close()
    _exactly_once(flaky, acked)


def test_full_disk_is_a_503_with_retry_after_and_readyz_not_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = SAMPLE_JSON.read_bytes()
    headers = {"Content-Type": "application/json"}
    with in_process(tmp_path / "data") as svc:
        service = svc.service
        store = service.report_store
        real_write = os.write
        spool = service.recorder.spool

        def full(fd: int, data: Any) -> int:
            if fd == spool._fd:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        acked: list[str] = []
        with svc.client() as c:
            r = c.post("/v1/decode", content=body, headers=headers)
            assert r.status_code == 200
            acked += r.json()["report_ids"]
            # the store goes down and the disk fills
            monkeypatch.setattr(store, "insert", _down)
            monkeypatch.setattr(store, "record", _down)
            monkeypatch.setattr(store, "ping", lambda: False)
            monkeypatch.setattr(spool_mod.os, "write", full)
            monkeypatch.setattr(spool_mod, "MIN_FREE_BYTES", 1 << 62)  # "no room" for readyz
            for _ in range(3):
                r = c.post("/v1/decode", content=body, headers=headers)
                assert r.status_code == 503, r.text
                assert r.json()["error"]["code"] == "report_spool_failed"
                assert r.headers["Retry-After"] == "5"
                assert "Traceback" not in r.text
            ready = c.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["status"] == "not ready" and ready.json()["store"] == "down"
            assert "No space left" in ready.json()["spool"]
            # space returns (the store still down): decodes spool again, readyz ready
            monkeypatch.setattr(spool_mod.os, "write", real_write)
            monkeypatch.setattr(spool_mod, "MIN_FREE_BYTES", 1 << 20)
            assert c.get("/readyz").json()["store"] == "spooling"
            for _ in range(3):
                r = c.post("/v1/decode", content=body, headers=headers)
                assert r.status_code == 200
                acked += r.json()["report_ids"]
            assert service.recorder.pending_bytes() > 0
            monkeypatch.undo()  # the store returns
            _wait(lambda: service.recorder.pending_bytes() == 0)
        assert len(acked) == 4
        _exactly_once(store, acked)


def _down(*_: Any) -> int:
    raise StoreDown("stopped")


# -- 3. batches, and new lines while draining --------------------------------------------------


def test_replay_drains_in_batches_while_new_lines_land(flaky: FlakyStore, tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", max_bytes=64 * 1024)
    recorder = Recorder(flaky, spool, retry_s=0.05)
    flaky.down = True
    acked: list[str] = []
    full = 0
    for _ in range(400):
        recs = _records()
        try:
            recorder.record(recs)
        except SpoolFull:
            full += 1
            continue
        acked.extend(r.id for r in recs)
    assert full > 0  # the spool filled during the outage
    spooled = len(acked)
    # the store returns, slowly (each transaction 0.2 s): decodes go on while it drains (to
    # the spool, behind the lines there; to the store directly while the spool is full)
    flaky.delay_s = 0.2
    flaky.down = False
    ours = threading.get_ident()
    direct: list[int] = []  # this thread's store transactions (a decode written directly)
    original = flaky.record

    def counted(records: Any, *rest: Any) -> list[str]:
        if threading.get_ident() == ours:
            direct.append(1)
        return original(records, *rest)

    flaky.record = counted  # type: ignore[method-assign]
    during = 0
    while spool.size() > 0 and during < 25:
        recs = _records()
        recorder.record(recs)  # never refused: the store is back
        acked.extend(r.id for r in recs)
        during += spool.size() > 0  # answered while the spool still drained
        time.sleep(0.002)
    flaky.delay_s = 0.0
    _wait(lambda: spool.size() == 0)
    recorder.close()
    _exactly_once(flaky, acked)
    # the spooled records went in 500 a transaction (not one line a transaction)
    assert flaky.transactions <= -(-spooled // 500) + during + len(direct) + 2
    assert during > 0  # decodes went on while it drained


# -- 4. a locked SQLite ------------------------------------------------------------------------


def _decode(c: PortalClient, body: bytes) -> tuple[int, list[str], float]:
    t = time.perf_counter()
    r = c.post("/v1/decode", content=body, headers={"Content-Type": "application/json"})
    took = time.perf_counter() - t
    return r.status_code, (r.json().get("report_ids", []) if r.status_code == 200 else []), took


def test_a_locked_sqlite_spools_promptly(tmp_path: Path) -> None:
    body = SAMPLE_JSON.read_bytes()
    with in_process(tmp_path / "data") as svc:
        store = svc.service.report_store
        acked: list[str] = []
        with svc.client() as c:
            status, ids, _ = _decode(c, body)
            assert status == 200
            acked += ids
            db = store.engine.url.database
            holder = sqlite3.connect(db, timeout=0, isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
            try:
                for _ in range(3):
                    status, ids, took = _decode(c, body)
                    assert status == 200
                    assert took < 15.0  # a 1 s busy timeout, not the 30 s decode timeout
                    acked += ids
                assert svc.service.recorder.pending_bytes() > 0
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            _wait(lambda: svc.service.recorder.pending_bytes() == 0)
        assert len(acked) == 4
        _exactly_once(store, acked)


# -- 2. starting while the store is down -------------------------------------------------------


def _known(tokens: Any, secret: str) -> bool:
    """Whether the replica's token view holds ``secret`` now (until its first read of the
    store, a token it cannot check is ``TokenStoreDown``: not yet)."""
    from wai_dispatch.service.store.bearer import TokenStoreDown

    try:
        return tokens.lookup(secret) is not None
    except TokenStoreDown:
        return False


def test_the_service_starts_while_its_store_is_down(tmp_path: Path) -> None:
    """Started once (its token view kept), then restarted while the SQLite store's folder
    cannot exist (a file stands where it should be): it starts, decodes spool on the kept
    token view; when the folder is back (empty: the store is migrated then) every acknowledged
    report is stored once."""
    from anyio.from_thread import start_blocking_portal

    from wai_dispatch.service.http.app import create_app
    from wai_dispatch.service.settings import load

    body = SAMPLE_JSON.read_bytes()
    data = tmp_path / "data"
    db_dir = tmp_path / "db"
    url = f"sqlite:///{db_dir / 'reports.db'}"
    with in_process(data, database_url=url) as first:
        tokens = first.tokens
    os.rename(db_dir, tmp_path / "db.old")
    db_dir.write_bytes(b"")  # the store's folder cannot be made: the store is down
    app = create_app(load(data_dir=data, port=8000, database_url=url, warm=False))
    acked: list[str] = []
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
    ):
        svc = InProcess(app, tokens, portal)
        assert not svc.service.recorder.migrated
        with svc.client() as c:
            assert c.get("/readyz").json()["store"] == "spooling"
            for _ in range(3):
                status, ids, _ = _decode(c, body)
                assert status == 200
                acked += ids
            assert svc.service.recorder.pending_bytes() > 0
            db_dir.unlink()
            db_dir.mkdir()  # the store returns, empty
            _wait(lambda: svc.service.recorder.pending_bytes() == 0)
            assert svc.service.recorder.migrated
            assert c.get("/readyz").json()["store"] == "up"
        # The store came back empty: its token table too, so the old token is refused once the
        # view refreshes (within token_refresh_s); the sink gets a token of the new store.
        svc.tokens = {**tokens, "sink": create_token(svc.service.report_store, "sink-a", Role.sink)}
        _wait(lambda: _known(svc.service.tokens, svc.tokens["sink"]))
        with svc.client() as c:
            status, ids, _ = _decode(c, body)
            assert status == 200
            acked += ids
        assert len(acked) == 4
        _exactly_once(svc.service.report_store, acked)
        assert (data / "admin-token").exists()


def test_the_token_view_is_kept_for_a_start_without_store(tmp_path: Path) -> None:
    # the snapshot, on the spool volume, holds hashes only, owner-readable only
    with in_process(tmp_path / "data") as svc:
        view = tmp_path / "data" / "spool" / "tokens.snapshot"
        assert oct(view.stat().st_mode & 0o777) == "0o600"
        text_ = view.read_text()
        assert all(secret not in text_ for secret in svc.tokens.values())


# -- 6. a damaged set --------------------------------------------------------------------------


def test_a_damaged_set_is_a_server_fault_and_readyz_says_so(tmp_path: Path) -> None:
    """A set file changed: its decode is 503 set_damaged; a file gone: /readyz is not ready (the
    registry lists a set this replica cannot decode) until the next sync fetches the set again
    from the registry (the sync's thread held off here: ``sets_refresh_s`` 300)."""
    body = SAMPLE_JSON.read_bytes()
    headers = {"Content-Type": "application/json"}
    with in_process(tmp_path / "data", sets_refresh_s=300) as svc:
        with svc.client() as c:
            r = c.post("/v1/decode", content=body, headers=headers)
            assert r.status_code == 200
            acked = r.json()["report_ids"]
            used = r.json()["set"]
            ready = c.get("/readyz").json()
            assert ready["status"] == "ready" and "damaged_sets" not in ready
            store = svc.service.decoder.set_store
            victim = store.root / used / "cdfs_q3.json"
            victim.chmod(0o644)
            victim.write_bytes(victim.read_bytes().replace(b"1", b"2", 1))  # same size
            r = c.post("/v1/decode", content=body, headers=headers)
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "set_damaged"
            assert "cdfs_q3.json" in r.json()["error"]["message"]
            assert str(store.root) not in r.text
            victim.unlink()  # a file gone: the cheap check sees it
            r = c.get("/readyz")
            others = [s.digest for s in store.list() if s.digest != used]
            assert others, "the bundled sets are two"
            assert r.status_code == 503 and r.json()["status"] == "not ready"
            assert r.json()["damaged_sets"] == [used]
            assert r.json()["missing_sets"] == [used]
            for digest in others:  # every set damaged
                (store.root / digest / "set.json").chmod(0o644)
                (store.root / digest / "set.json").write_bytes(b"{")
            r = c.get("/readyz")
            assert r.status_code == 503 and r.json()["status"] == "not ready"
            assert r.json()["damaged_sets"] == sorted([used, *others])
            assert r.json()["missing_sets"] == sorted([used, *others])
            svc.service.sets.sync()  # each fetched again from the registry, checked, installed
            r = c.get("/readyz")
            assert r.status_code == 200, r.text
            assert "damaged_sets" not in r.json() and "missing_sets" not in r.json()
            r = c.post("/v1/decode", content=body, headers=headers)
            assert r.status_code == 200, r.text  # the set whole again: it decodes
            acked += r.json()["report_ids"]
        _exactly_once(svc.service.report_store, acked)


def test_readyz_is_not_ready_while_the_spool_folder_cannot_be_written(tmp_path: Path) -> None:
    """Issue 29: the store up is not enough: a spool that cannot take a line now (its folder
    replaced by a file: root writes through any mode bits) makes /readyz 503 with the reason,
    and ready again once the folder is back."""
    with in_process(tmp_path / "data") as svc, svc.client() as c:
        assert c.get("/readyz").status_code == 200
        folder = svc.service.recorder.spool.directory
        aside = folder.with_name(folder.name + ".aside")
        folder.rename(aside)
        folder.write_text("not a folder")
        try:
            ready = c.get("/readyz")
            assert ready.status_code == 503, ready.text
            body = ready.json()
            assert body["status"] == "not ready" and body["store"] == "up"
            assert body["spool"] == "cannot write: Not a directory"
            assert body["reasons"] == ["the spool cannot take a line (Not a directory)"]
        finally:
            folder.unlink()
            aside.rename(folder)
        assert c.get("/readyz").status_code == 200


def test_readyz_is_not_ready_under_the_free_space_floor(tmp_path: Path) -> None:
    floor = 1 << 60  # more than any volume here has free
    with in_process(tmp_path / "data", min_free_bytes=floor) as svc, svc.client() as c:
        ready = c.get("/readyz")
        assert ready.status_code == 503
        body = ready.json()
        free = body["free_bytes"]
        assert set(free) == {"data", "spool"} and all(0 < n < floor for n in free.values())
        assert body["reasons"] == [
            f"the data volume has {free['data']} bytes free, under min_free_bytes={floor}",
            f"the spool volume has {free['spool']} bytes free, under min_free_bytes={floor}",
        ]
    with in_process(tmp_path / "data", min_free_bytes=0) as svc, svc.client() as c:
        assert c.get("/readyz").status_code == 200


def test_size_counts_each_line_once_while_the_drain_renames(tmp_path: Path) -> None:
    """``size`` reads both files under the lock the rename takes, so a rename between its two
    reads never counts a line twice (it did, once, under load); and it still answers once the
    spool is closed."""
    spool = Spool(tmp_path / "spool", max_bytes=1 << 20)
    spool.append([r.to_json() for r in _records()])
    one = spool.size()
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(spool.size())

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(200):  # the line goes back and forth between the two files
            assert spool._rotate()
            with spool._locked():  # as a replay that moves it back would
                os.rename(spool.draining, spool.path)
    finally:
        stop.set()
        watcher.join()
    assert seen and set(seen) == {one}
    spool.close()
    assert spool.size() == one


def _fill(spool: Spool, room: int) -> list[str]:
    """Append one whole line (two records, padded with spaces) leaving ``room`` bytes under
    ``spool_max_bytes``; the ids of its records."""
    recs = _records()
    text = json.dumps([r.to_json() for r in recs], separators=(",", ":")).encode()
    pad = spool.max_bytes - room - spool.new_bytes() - len(text) - 1
    assert pad >= 0
    with open(spool.path, "ab") as fh:
        fh.write(text + b" " * pad + b"\n")
    assert spool.new_bytes() == spool.max_bytes - room
    return [r.id for r in recs]


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_readyz_is_ready_only_with_room_for_the_next_decodes_reports(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Issue 36, item 5: with the store down, ``/readyz`` calls the replica ready only while
    the spool has room for the next decode's line, by the rule its append refuses by
    (``spool.fits``): a spool one byte short of that room is 503 on ``/readyz`` and on
    decodes alike (it was ``200 spooling`` while every decode got ``report_spool_full``); with
    the room, both take it. The store back, every acknowledged report is stored once."""
    chosen: dict[str, Any] = {"spool_max_bytes": 1 << 20}
    if kind == "postgresql":
        chosen["database_url"] = request.getfixturevalue("postgres_url")
    body, headers = SAMPLE_JSON.read_bytes(), {"Content-Type": "application/json"}
    with in_process(tmp_path / "data", **chosen) as svc, svc.client() as c:
        store, spool = svc.service.report_store, svc.service.recorder.spool
        monkeypatch.setattr(store, "insert", _down)
        monkeypatch.setattr(store, "record", _down)
        monkeypatch.setattr(store, "ping", lambda: False)
        r = c.post("/v1/decode", content=body, headers=headers)
        assert r.status_code == 200, r.text  # spooled
        acked = r.json()["report_ids"]
        _wait(spool.draining.exists)  # the replay thread tried it: new lines now stay
        line = spool.size()  # one decode's line
        assert 0 < line < spool_mod.NEXT_LINE_BYTES == spool.largest
        acked += _fill(spool, spool.largest - 1)
        ready = c.get("/readyz")
        assert ready.status_code == 503 and ready.json()["store"] == "down", ready.text
        assert "no room for a decode's reports" in " ".join(ready.json()["reasons"])
        spool.max_bytes += 1  # exactly the room: ready, and a decode's line goes in
        assert c.get("/readyz").json()["store"] == "spooling"
        r = c.post("/v1/decode", content=body, headers=headers)
        assert r.status_code == 200, r.text
        acked += r.json()["report_ids"]
        # under a decode's line (its length varies by a few bytes): the decode is refused too
        acked += _fill(spool, line // 2)
        assert c.get("/readyz").status_code == 503
        r = c.post("/v1/decode", content=body, headers=headers)
        assert r.status_code == 503 and r.json()["error"]["code"] == "report_spool_full"
        monkeypatch.undo()  # the store returns
        _wait(lambda: svc.service.recorder.pending_bytes() == 0)
        _exactly_once(store, acked)


@pytest.mark.parametrize("where", ["path", "draining"])
def test_empty_sees_a_line_renamed_between_its_two_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """``empty`` reads the two files without the lock (the recorder asks it for every decode):
    a line waiting in either file is seen, and a drain that renames it to the draining file
    right after the first read (the file taking lines: read in the other order, a line
    renamed between the reads would be missed) still leaves it seen."""
    spool = Spool(tmp_path / "spool", max_bytes=1 << 20)
    assert spool.empty()
    spool.append([r.to_json() for r in _records()])
    if where == "draining":
        assert spool._rotate()
    assert not spool.empty()
    real = spool_mod._size
    reads: list[Path] = []

    def racing(path: Path) -> int:
        n = real(path)
        reads.append(path)
        if len(reads) == 1 and not spool.draining.exists():
            assert spool._rotate()  # the drain renames the waiting line away right now
        return n

    monkeypatch.setattr(spool_mod, "_size", racing)
    assert not spool.empty()
    assert reads[0] == spool.path
    monkeypatch.undo()
    spool.replay(lambda batch: len(batch))
    assert spool.empty() and spool.size() == 0
    spool.close()
