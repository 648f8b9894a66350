"""Issue 29, item 2: a request-error log that is complete, bounded and unblindable, on SQLite
and PostgreSQL. Every error is counted (code, route, sink) in per-hour roll-ups whose size does
not grow with the requests: 20,000 anonymous errors leave the tables within a fixed size, while
every sink's error of the same run is listed; a sink's rows are capped per hour, the drops
counted and shown; a NUL or a lone surrogate in a path is kept (sanitised), never taking its
batch with it; a batch the store refuses is retried piece by piece."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from wai_dispatch.service.store import request_errors
from wai_dispatch.service.store.models import (
    RequestErrorRollupRow,
    RequestErrorRow,
    RequestErrorSampleRow,
)
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.request_error_views import list_errors
from wai_dispatch.service.store.request_errors import ErrorLog, clean

ANON_CODES = [
    (401, "auth_missing", "/v1/decode"),
    (401, "auth_invalid", "/v1/reports"),
    (404, "not_found", "(no route)"),
    (422, "request_invalid", "/v1/reports"),
]


def _rows(store: ReportStore, table: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_a_flood_of_anonymous_errors_stays_within_a_fixed_size(store: ReportStore) -> None:
    log = ErrorLog(store, rows_per_hour=5, interval_s=3600)
    try:
        for i in range(20_000):
            status, code, route = ANON_CODES[i % len(ANON_CODES)]
            # every path distinct and long, some with a NUL (PostgreSQL refuses one in text)
            path = f"/v1/{'x' * 200}/{i}" + ("\x00" if i % 50 == 0 else "")
            log.note(
                status, code, sink=None, request_id=f"a{i}", method="GET", path=path, route=route
            )
            if i % 5000 == 4999:
                assert log.flush()
            if i % 4000 == 0:  # a sink's errors in the same run, under its cap
                log.note(
                    400,
                    "request_invalid",
                    sink="kiosk-1",
                    request_id=f"k{i}",
                    method="POST",
                    path="/v1/decode\x00",
                    route="/v1/decode",
                )
        assert log.flush()
    finally:
        log.close()
    assert (log.counted, log.written, log.dropped, log.lost) == (20_005, 5, 0, 0)
    # the tables: one roll-up row per (hour, sink, code, status, route) — at most two hours
    # were touched (a run across an hour's end) — and the sink's rows only
    assert _rows(store, RequestErrorRollupRow.__table__) <= 2 * (len(ANON_CODES) + 1)
    assert _rows(store, RequestErrorRow.__table__) == 5
    assert _rows(store, RequestErrorSampleRow.__table__) <= 2
    got = list_errors(store, limit=50)
    assert got["total"] == 20_005
    assert {(r["code"], r["status"]): r["count"] for r in got["by_code"]} == {
        ("auth_missing", 401): 5000,
        ("auth_invalid", 401): 5000,
        ("not_found", 404): 5000,
        ("request_invalid", 422): 5000,
        ("request_invalid", 400): 5,
    }
    assert {r["sink"]: r["count"] for r in got["by_sink"]} == {None: 20_000, "kiosk-1": 5}
    # every authenticated error is listed, its NUL kept as U+FFFD
    assert sorted(r["request_id"] for r in got["items"]) == sorted(
        f"k{i}" for i in range(0, 20_000, 4000)
    )
    assert {r["path"] for r in got["items"]} == {"/v1/decode\ufffd"}
    assert {r["route"] for r in got["items"]} == {"/v1/decode"}


def test_a_sinks_rows_are_capped_per_hour_and_the_drops_shown(store: ReportStore) -> None:
    # two writers (two replicas) on one store, each under the cap alone: the store holds it
    logs = [ErrorLog(store, rows_per_hour=3, interval_s=3600) for _ in range(2)]
    try:
        for i in range(10):
            logs[i % 2].note(
                403,
                "role_insufficient",
                sink="noisy",
                request_id=f"n{i}",
                method="GET",
                path="/v1/fleet/sinks",
                route="/v1/fleet/sinks",
            )
        logs[0].note(
            422,
            "request_invalid",
            sink="quiet",
            request_id="q",
            method="GET",
            path="/v1/reports",
            route="/v1/reports",
        )
        assert all(log.flush() for log in logs)
    finally:
        for log in logs:
            log.close()
    got = list_errors(store)
    assert got["total"] == 11
    assert got["rows"] == {"kept": 4, "dropped": 7}
    assert sorted(r["sink"] for r in got["items"]) == ["noisy"] * 3 + ["quiet"]
    assert list_errors(store, sinks=("noisy",))["rows"] == {"kept": 3, "dropped": 7}
    # paged by keyset, newest first, each row once
    seen, after = [], None
    while True:
        page = list_errors(store, limit=1, after=after)
        seen += [r["request_id"] for r in page["items"]]
        if page["next"] is None:
            break
        after = page["next"]
    assert sorted(seen) == sorted(r["request_id"] for r in got["items"])


def test_a_batch_the_store_refuses_is_retried_piece_by_piece(
    store: ReportStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import DataError

    real = request_errors._add_rows

    def refuse_bad(conn: Any, group: Any, seen: int, rows: Any, cap: int) -> int:
        rows = list(rows)
        if any(r.request_id == "bad" for r in rows):
            raise DataError("INSERT", {}, Exception("a row this store refuses"))
        return real(conn, group, seen, rows, cap)

    monkeypatch.setattr(request_errors, "_add_rows", refuse_bad)
    log = ErrorLog(store, rows_per_hour=100, interval_s=3600)
    try:
        for rid in ("ok-1", "bad", "ok-2"):
            log.note(
                400,
                "request_invalid",
                sink="s",
                request_id=rid,
                method="POST",
                path="/v1/decode",
                route="/v1/decode",
            )
        log.flush()
    finally:
        log.close()
    got = list_errors(store)
    assert got["total"] == 3  # every error counted
    assert sorted(r["request_id"] for r in got["items"]) == ["ok-1", "ok-2"]
    assert (log.written, log.lost) == (2, 1)


def test_clean_keeps_text_every_store_takes() -> None:
    assert clean("/v1/reports", 256) == "/v1/reports"
    assert clean("a\x00b\x1fc\x7fd\ud800e", 256) == "a\ufffdb\ufffdc\ufffdd\ufffde"
    assert clean("é" * 300, 256) == "é" * 256
