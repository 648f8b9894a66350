"""Exactly once per request and group commit, on SQLite and PostgreSQL: a report's identity
(sink, request id, ordinal) is stored once and a retry gets the first ids back; concurrent
writers through group commit are all stored, each answered only once its commit is visible
from another connection; the store down sends each request to the spool; a run report of
1,000 decodes goes in as one multi-row statement."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from wai_dispatch.service.governance import parse_run_report
from wai_dispatch.service.store.policies import PolicyStore, submit
from wai_dispatch.service.store.recorder import GroupCommit, Recorder
from wai_dispatch.service.store.records import ReportRecord
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.spool import Spool

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_796_000_000_000


def request_records(request_id: str, n: int = 2, *, sink: str = "a") -> list[ReportRecord]:
    """One request's records (primary, then fallback), each with a fresh id."""
    out = []
    for role in ("primary", "fallback")[:n]:
        out.append(ReportRecord.from_json({
            "id": str(uuid.uuid4()), "request_id": request_id, "created_ms": T0, "sink": sink,
            "role": role, "capability": "wai.neural.bmshj2018", "set_digest": "ab" * 32,
            "symbols_digest": "cd" * 32, "rgb_digest": None, "needed": "none",
            "path_ran": "cpu/onnx-runtime/float" if role == "fallback" else None,
            "tier": "none" if role == "fallback" else None,
            "outcome": "decoded" if role == "fallback" else "refused", "duration_ms": 1.0,
            "placement": {}, "report": {"kind": "wai-neural-dispatch/1"},
            "refusals": [{"path": "npu/model-runtime/float", "code": "dispatch_unit_absent"}],
        }))  # fmt: skip
    return out


def rows(store: ReportStore, request_id: str) -> list[tuple[str, int]]:
    with store.engine.connect() as conn:
        got = conn.execute(
            text("SELECT id, ordinal FROM reports WHERE request_id = :r ORDER BY ordinal"),
            {"r": request_id},
        )
        return [(str(i), int(o)) for i, o in got]


def test_a_retried_request_is_stored_once_and_gets_the_first_ids(store: ReportStore) -> None:
    first = request_records("req-1")
    assert store.record(first) == [r.id for r in first]
    retry = request_records("req-1")  # the same request again: fresh ids, same identities
    assert store.record(retry) == [r.id for r in first]
    assert store.insert(request_records("req-1")) == 0
    assert rows(store, "req-1") == [(first[0].id, 0), (first[1].id, 1)]
    # another sink's request of the same id is its own
    other = request_records("req-1", sink="b")
    assert store.record(other) == [r.id for r in other]
    # a retry that tried its fallback where the first did not: only the new ordinal goes in
    one = request_records("req-2", n=1)
    store.record(one)
    both = request_records("req-2")
    assert store.record(both) == [one[0].id, both[1].id]
    assert store.count() == 6
    # two copies of one identity in one batch (two retries grouped): stored once
    twins = request_records("req-3", n=1) + request_records("req-3", n=1)
    assert store.record(twins) == [twins[0].id, twins[0].id]
    assert rows(store, "req-3") == [(twins[0].id, 0)]


def test_group_commit_stores_every_writer_and_answers_after_its_commit(
    store: ReportStore,
) -> None:
    n = 24
    group = GroupCommit(store.record, window_s=0.05, max_records=10)
    start = threading.Barrier(n)
    seen: dict[int, list[tuple[str, int]]] = {}
    answered: dict[int, list[str]] = {}

    def writer(i: int) -> None:
        records = request_records(f"w-{i}")
        start.wait()
        answered[i] = group.submit(records)
        seen[i] = rows(store, f"w-{i}")  # another connection: committed before the answer

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    group.close()
    assert store.count() == 2 * n
    assert all(seen[i] == [(answered[i][0], 0), (answered[i][1], 1)] for i in range(n))
    assert group.requests == n
    assert group.batches >= n * 2 // 10  # at most 10 records a batch: 5 requests


def test_a_bad_row_fails_only_its_own_request(store: ReportStore) -> None:
    group = GroupCommit(store.record, window_s=0.2, max_records=100)
    bad = [replace(r, request_id="x" * 100) for r in request_records("bad")]  # past String(36)
    good = request_records("good")
    errors: list[BaseException] = []

    def submit_bad() -> None:
        try:
            group.submit(bad)
        except StoreDown as exc:
            errors.append(exc)

    t = threading.Thread(target=submit_bad)
    t.start()
    ids = group.submit(good)
    t.join(30)
    group.close()
    assert rows(store, "good") == [(ids[0], 0), (ids[1], 1)]
    if store.dialect == "postgresql":  # SQLite does not enforce a VARCHAR's length
        assert len(errors) == 1


def test_the_store_down_sends_each_request_to_the_spool(
    store: ReportStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(tmp_path / "spool", max_bytes=1 << 20)
    recorder = Recorder(store, spool, retry_s=0.05, commit_window_s=0.01)
    try:
        ok = recorder.record(request_records("up"))
        assert [i for i, _ in rows(store, "up")] == [r.id for r in ok]

        def down(records: Any, *_: Any) -> list[str]:  # (records, rows)
            raise StoreDown("switched down")

        monkeypatch.setattr(store, "record", down)
        monkeypatch.setattr(store, "insert", down)  # the replay's
        done: list[list[ReportRecord]] = []

        def one(i: int) -> None:
            done.append(recorder.record(request_records(f"down-{i}")))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(done) == 4 and not recorder.store_up
        files = [tmp_path / "spool" / n for n in ("reports.draining.jsonl", "reports.jsonl")]
        with spool._locked():  # the lock the replay renames the first file to the second under
            lines = [line for f in files if f.exists() for line in f.read_bytes().splitlines()]
        spooled = sorted(r["request_id"] for line in lines for r in json.loads(line))
        assert spooled == sorted(f"down-{i}" for i in range(4) for _ in range(2))
        monkeypatch.undo()  # back: the recorder's thread replays the spool into the store
        deadline = time.monotonic() + 30
        while recorder.pending_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.count() == 2 + 8
    finally:
        recorder.close()


def test_a_run_report_of_1000_decodes_goes_in_as_one_statement(store: ReportStore) -> None:
    example = json.loads((ROOT / "docs" / "examples" / "run-report.json").read_text())
    policies = PolicyStore(store)
    policies.set((ROOT / "docs" / "examples" / "policy.yaml").read_text(), by="test", now_ms=T0)
    decodes = [example["decodes"][0]] * 1000
    body = json.dumps({**example, "id": "big", "decodes": decodes}).encode()
    run = parse_run_report(json.loads(body))
    inserts: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # SQLite: a multi-row INSERT; PostgreSQL: one statement for everything (bulk_pg.py)
        if statement.lstrip().startswith(("INSERT INTO reports ", "WITH src AS")):
            inserts.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        answer, replayed = submit(store, policies, run, body, sink=run.sink)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert answer["accepted"] is True and not replayed
    assert len(inserts) == 1  # one multi-row statement for the 1,000 decodes
    with store.engine.connect() as conn:
        got = conn.execute(text("SELECT count(*), count(DISTINCT ordinal), max(ordinal) "
                                "FROM reports WHERE run_report = 'big'")).one()  # fmt: skip
    assert tuple(got) == (1000, 1000, 999)


def test_the_migration_numbers_the_reports_stored_before(store: ReportStore) -> None:
    """Rows from before 0007, a request stored twice among them, get ordinals by seq, so the
    unique identity holds on an existing store and no row is lost."""
    from alembic import command
    from alembic.config import Config

    from wai_dispatch.service.store.report_store import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0006")
    for _ in range(2):  # the same request twice, as 0006 allowed
        with store.engine.begin() as conn:
            for rec in request_records("old"):
                conn.execute(
                    text(
                        "INSERT INTO reports (id, request_id, created_ms, sink, role, "
                        "capability, needed, outcome, duration_ms, placement_npu, placement_gpu, "
                        "placement_cpu, placement_unknown, report, source) VALUES (:id, 'old', "
                        "1, 'a', :role, 'c', 'none', 'refused', 1.0, 0, 0, 0, 0, '{}', 'service')"
                    ),
                    {"id": rec.id, "role": rec.role},
                )
    store.migrate()
    assert [o for _, o in rows(store, "old")] == [0, 1, 2, 3]
    assert store.record(request_records("old")) == [i for i, _ in rows(store, "old")][:2]


@pytest.mark.parametrize("window", [None, 0.002])
def test_an_identity_stored_by_another_request_refuses_the_second(
    store: ReportStore, tmp_path: Path, window: float | None
) -> None:
    """Issue 36, item 3: two replicas decoding one request id at once, each with its own
    envelope, both past the check before either stored: the second to commit stores nothing
    and is refused (``request_id_reused``); the same envelope's is the retry it always was."""
    from wai_dispatch.service.store.errors import StoreError

    recorder = Recorder(store, Spool(tmp_path / "spool", 1 << 20), commit_window_s=window)
    try:

        def asked(digest: str) -> list[ReportRecord]:
            return [replace(r, request_digest=digest) for r in request_records("req-d")]

        first = recorder.record(asked("1" * 64))
        with pytest.raises(StoreError) as refused:
            recorder.record(asked("2" * 64))
        assert refused.value.code == "request_id_reused"
        assert rows(store, "req-d") == [(r.id, i) for i, r in enumerate(first)]
        assert [r.id for r in recorder.record(asked("1" * 64))] == [r.id for r in first]
        assert store.asked("a", "req-d") == "1" * 64 and store.asked("a", "req-x") is None
    finally:
        recorder.close()


def test_a_lone_writer_commits_in_its_own_thread_and_the_next_batch_forms_meanwhile(
    store: ReportStore,
) -> None:
    """SQLite's group commit (``inline``): a request arriving with nothing queued and nothing
    being committed is stored in its own thread, no handoff; the requests arriving while it
    commits wait, and the committer stores them together once it is done."""
    others_in = threading.Event()
    calls: list[tuple[str, int]] = []

    def commit(records: Any, rows: Any) -> list[str]:
        calls.append((threading.current_thread().name, len(records)))
        if len(calls) == 1:
            assert others_in.wait(30)
        return store.record(records, rows)

    group = GroupCommit(commit, window_s=0.05, max_records=100, inline=True)
    answered: dict[str, list[str]] = {}

    def lone() -> None:
        answered["lone"] = group.submit(request_records("lone"))

    first = threading.Thread(target=lone, name="lone-writer")
    first.start()
    deadline = time.monotonic() + 30
    while not calls and time.monotonic() < deadline:
        time.sleep(0.005)
    waits = {f"w-{i}": group.enqueue(request_records(f"w-{i}")) for i in range(3)}
    others_in.set()
    answered.update({k: w() for k, w in waits.items()})
    first.join(30)
    group.close()
    assert calls == [("lone-writer", 2), ("report-commit-0", 6)]
    assert (group.batches, group.requests) == (2, 4)
    assert store.count() == 8
    assert all(rows(store, k) == [(v[0], 0), (v[1], 1)] for k, v in answered.items())


def test_several_committers_take_whole_batches_never_an_empty_one() -> None:
    """With several committers one waits a batch's window at a time: none takes an empty
    batch that another emptied meanwhile (an empty transaction a turn), and every request is
    answered with its own ids once."""
    sizes: list[int] = []
    lock = threading.Lock()

    def commit(records: Any, _rows: Any) -> list[str]:
        with lock:
            sizes.append(len(records))
        time.sleep(0.005)  # the requests arriving meanwhile form the next batches
        return [r.id for r in records]

    group = GroupCommit(commit, window_s=0.002, max_records=1000, committers=4)
    answered: list[list[str]] = []

    def writer(k: int) -> None:
        for n in range(20):
            records = request_records(f"{k}-{n}", 1)
            ids = group.submit(records)
            assert ids == [records[0].id]
            with lock:
                answered.append(ids)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    group.close()
    assert len(answered) == 32 * 20
    assert 0 not in sizes and sum(sizes) == 32 * 20
    assert group.requests == 32 * 20 and group.batches == len(sizes)
