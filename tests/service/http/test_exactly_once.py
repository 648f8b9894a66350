"""One report per request id through ``POST /v1/decode`` (SQLite and PostgreSQL, the app in
process with group commit on, its default): a request sent again with the same
``X-Request-Id`` stores nothing more and answers with the first decode's report ids; a crash
injected between the commit and the answer, then the client's retry, finds one report; a
request without an id gets a fresh one each time, as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _svc import SAMPLE_JSON, in_process, pg_database
from sqlalchemy import text

JSON = {"Content-Type": "application/json"}


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)], scope="module"
)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "sqlite":
        with in_process(tmp_path_factory.mktemp("once")) as running:
            yield running
        return
    admin = request.getfixturevalue("postgres")
    with (
        pg_database(admin) as url,
        in_process(tmp_path_factory.mktemp("once"), database_url=url) as running,
    ):
        yield running


def stored(live: Any, request_id: str) -> list[str]:
    with live.service.report_store.engine.connect() as conn:
        got = conn.execute(
            text("SELECT id FROM reports WHERE request_id = :r ORDER BY ordinal"),
            {"r": request_id},
        )
        return [str(r[0]) for r in got]


def decode(client: Any, request_id: str | None = None) -> Any:
    headers = {**JSON, **({"X-Request-Id": request_id} if request_id else {})}
    return client.post("/v1/decode", content=SAMPLE_JSON.read_bytes(), headers=headers)


def test_a_retried_request_id_stores_one_report_and_answers_the_first_ids(live: Any) -> None:
    assert live.service.recorder.group is not None  # group commit is the default
    with live.client() as c:
        first = decode(c, "job-7:try")
        assert first.status_code == 200, first.text
        again = decode(c, "job-7:try")
        assert again.status_code == 200
        assert again.json()["report_ids"] == first.json()["report_ids"]
        assert stored(live, "job-7:try") == first.json()["report_ids"]
        # without an id each request is its own, with its own reports
        a, b = decode(c), decode(c)
        assert a.json()["request_id"] != b.json()["request_id"]
        assert stored(live, a.json()["request_id"]) == a.json()["report_ids"]
        assert stored(live, b.json()["request_id"]) == b.json()["report_ids"]


def test_a_crash_between_commit_and_answer_then_a_retry_finds_one_report(
    live: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = live.service.recorder
    real = recorder.begin
    committed: list[list[str]] = []

    def crash_after_commit(records: Any) -> Any:
        durable = real(records)

        def crashed() -> Any:
            kept = durable()  # committed: durable in the store
            committed.append([r.id for r in kept])
            raise RuntimeError("injected: the replica dies before it answers")

        return crashed

    monkeypatch.setattr(recorder, "begin", crash_after_commit)
    with live.client() as c:
        try:
            lost = decode(c, "job-8")
            assert lost.status_code == 500  # the client gets no decode
        except RuntimeError:
            pass  # the transport re-raised the app's fault: no answer either way
        monkeypatch.undo()
        assert stored(live, "job-8") == committed[0]
        retry = decode(c, "job-8")
        assert retry.status_code == 200, retry.text
        assert retry.json()["report_ids"] == committed[0]
    assert stored(live, "job-8") == committed[0]  # one report for the request id
