"""One report per request id through ``POST /v1/decode`` (SQLite and PostgreSQL, the app in
process with group commit on, its default): a request sent again with the same
``X-Request-Id`` stores nothing more and answers with the first decode's report ids; a crash
injected between the commit and the answer, then the client's retry, finds one report; a
request without an id gets a fresh one each time, as before. Issue 36, item 3: the same id with
another envelope is refused (422 ``request_id_reused``: nothing decoded, nothing stored), also
after a refused decode, whose retry is the same refusal with the first ids; the same id while
its first decode runs is 409 ``request_in_flight``; two decodes in one W3C trace are two
requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _svc import REPLICATE, SAMPLE_JSON, in_process, pg_database
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


def decode(client: Any, request_id: str | None = None, body: bytes | None = None) -> Any:
    headers = {**JSON, **({"X-Request-Id": request_id} if request_id else {})}
    body = SAMPLE_JSON.read_bytes() if body is None else body
    return client.post("/v1/decode", content=body, headers=headers)


def code(r: Any) -> tuple[int, str]:
    return r.status_code, r.json()["error"]["code"]


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


def test_the_same_id_with_another_envelope_is_refused_and_nothing_stored(live: Any) -> None:
    other = json.dumps(json.loads(SAMPLE_JSON.read_bytes())).encode()  # the same, other bytes
    with live.client() as c:
        first = decode(c, "job-9")
        n = live.service.report_store.count()
        for body in (other, REPLICATE.read_bytes()):
            again = decode(c, "job-9", body)
            assert code(again) == (422, "request_id_reused"), again.text
            assert "report_ids" not in again.json()  # nothing decoded
        assert live.service.report_store.count() == n  # nothing stored
        assert stored(live, "job-9") == first.json()["report_ids"]
        assert decode(c, "job-9").json()["report_ids"] == first.json()["report_ids"]  # a retry
        assert decode(c, "job-9b", other).status_code == 200  # another id: its own request


def test_a_refused_decode_retried_is_the_same_refusal_and_keeps_its_id(live: Any) -> None:
    with live.client() as c:
        refused = decode(c, "job-10", REPLICATE.read_bytes())
        assert code(refused) == (422, "decode_no_path")
        again = decode(c, "job-10", REPLICATE.read_bytes())
        assert code(again) == (422, "decode_no_path")
        assert again.json()["report_ids"] == refused.json()["report_ids"]
        good = decode(c, "job-10")  # a good envelope under the refused one's id
        assert code(good) == (422, "request_id_reused"), good.text
    assert stored(live, "job-10") == refused.json()["report_ids"]


def test_a_request_id_still_running_is_409_and_another_body_under_it_422(live: Any) -> None:
    from wai_dispatch.service.store.records import request_digest

    digest = request_digest("json", SAMPLE_JSON.read_bytes())
    with live.service.recorder.claim("sink-a", "job-11", lambda: digest), live.client() as c:
        assert code(decode(c, "job-11")) == (409, "request_in_flight")
        assert code(decode(c, "job-11", REPLICATE.read_bytes())) == (422, "request_id_reused")
        assert decode(c, "job-11b").status_code == 200
    assert stored(live, "job-11") == []
    with live.client() as c:
        assert decode(c, "job-11").status_code == 200  # once the first answered


def test_two_decodes_in_one_trace_are_two_requests(live: Any) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    with live.client() as c:
        a, b = (
            c.post(
                "/v1/decode",
                content=SAMPLE_JSON.read_bytes(),
                headers={**JSON, "traceparent": f"00-{trace}-{parent}-01"},
            )
            for parent in ("00f067aa0ba902b7", "00f067aa0ba902b8")
        )
    assert a.status_code == b.status_code == 200
    assert a.json()["request_id"] != b.json()["request_id"]
    for r in (a, b):
        assert stored(live, r.json()["request_id"]) == r.json()["report_ids"]
