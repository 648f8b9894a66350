"""Metrics and logs by convention: counters end in ``_total``, build info and process metrics,
the decode histogram by path, one ``/metrics`` over every ``serve --workers N`` process; the
caller's request id taken, JSON logs with no ANSI and with pid, client and sink."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from _svc import SAMPLE_JSON, InProcess, free_port, in_process
from prometheus_client.parser import text_string_to_metric_families

from wai_dispatch.service.http.edge import incoming_id
from wai_dispatch.service.http.logs import JsonFormatter

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with in_process(tmp_path_factory.mktemp("metrics") / "data") as running:
        yield running


def _decode(c: httpx.Client | object, **headers: str) -> httpx.Response:
    r = c.post(  # type: ignore[attr-defined]
        "/v1/decode",
        content=SAMPLE_JSON.read_bytes(),
        headers={"Content-Type": "application/json", **headers},
    )
    assert r.status_code == 200, r.text
    return r  # type: ignore[no-any-return]


def check_exposition(text: str) -> dict[str, str]:
    """What ``promtool check metrics`` checks that the parser can: every family parses, has
    help and a type, a legal name, no family twice; a counter's samples end in ``_total``
    (or ``_created``). The families' types by name."""
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        assert NAME.fullmatch(family.name), family.name
        assert family.name not in types, f"{family.name} twice"
        assert family.documentation, f"{family.name} has no help"
        types[family.name] = family.type
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name.endswith(("_total", "_created")), sample.name
    return types


def test_metrics_follow_the_conventions(live: InProcess) -> None:
    with live.client() as c:
        _decode(c)
        text = c.get("/metrics").text
    types = check_exposition(text)
    for counter in ("wai_decodes", "wai_refusals", "wai_request_errors"):
        assert types[counter] == "counter"
    for counter in ("hits", "misses", "evictions"):
        assert types[f"wai_program_cache_{counter}"] == "counter"
        assert re.search(rf"^wai_program_cache_{counter}_total \d", text, re.M)
    assert types["wai_program_cache_bytes"] == "gauge"
    assert re.search(r'^wai_build_info\{python="3\.\d+\.\d+",version="[^"]+"\} 1\.0$', text, re.M)
    assert re.search(r"^process_resident_memory_bytes \d", text, re.M)
    assert types["wai_decode_seconds"] == "histogram"
    assert re.search(
        r'^wai_decode_seconds_count\{path="cpu/onnx-runtime/float"\} [1-9]', text, re.M
    )


def test_the_callers_request_id_is_taken(live: InProcess) -> None:
    with live.client() as c:
        r = _decode(c, **{"X-Request-Id": "sink-a.job:42"})
        assert r.headers["x-request-id"] == "sink-a.job:42"
        assert r.json()["request_id"] == "sink-a.job:42"
        rid = r.json()["report_ids"][0]
        with live.client("operator") as ops:
            assert ops.get(f"/v1/reports/{rid}").json()["request_id"] == "sink-a.job:42"
        trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        r = _decode(c, traceparent=f"00-{trace}-00f067aa0ba902b7-01")
        assert re.fullmatch(r"[0-9a-f-]{36}", r.headers["x-request-id"])  # a trace: no request
        for hostile in ("x" * 37, "a b", "ünï".encode(), "id\x7f"):
            r = c.get("/v1/sets", headers={"X-Request-Id": hostile})
            assert r.headers["x-request-id"] not in (hostile, "ünï")
            assert re.fullmatch(r"[0-9a-f-]{36}", r.headers["x-request-id"])


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([(b"x-request-id", b"abc")], "abc"),
        ([(b"X-Request-Id", b" abc ")], "abc"),
        ([(b"x-request-id", b"a" * 36)], "a" * 36),
        ([(b"x-request-id", b"a" * 37)], None),
        ([(b"x-request-id", b"")], None),
        ([(b"x-request-id", b"a\r\nb")], None),
        ([(b"traceparent", b"00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01")], None),
        ([(b"x-request-id", b"first"), (b"X-Request-Id", b"second")], "first"),
    ],
)
def test_incoming_ids(headers: list[tuple[bytes, bytes]], expected: str | None) -> None:
    assert incoming_id(headers) == expected


def test_json_logs_carry_no_ansi_and_name_the_process() -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, "", 0, "Started %s", ("x",), None)
    record.color_message = "Started \x1b[36m%s\x1b[0m"
    line = JsonFormatter().format(record)
    assert "\x1b" not in line and "\\u001b" not in line
    obj = json.loads(line)
    assert obj["pid"] == os.getpid() and obj["message"] == "Started x"
    assert "color_message" not in obj


def test_the_request_line_names_client_and_sink(
    live: InProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="wai_dispatch.service"), live.client() as c:
        _decode(c, **{"X-Request-Id": "line-check"})
        c.get("/healthz")
    lines = [r for r in caplog.records if r.getMessage() == "request"]
    mine = [r for r in lines if getattr(r, "request_id", None) == "line-check"]
    assert len(mine) == 1
    assert mine[0].sink == "sink-a"  # type: ignore[attr-defined]
    assert mine[0].client  # type: ignore[attr-defined]


def test_a_late_service_line_stays_off_the_terminal(
    live: InProcess, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request's line a server thread writes after its test ended, while pytest reports
    (``sys.stderr`` its terminal, capture suspended), writes nothing there; the record still
    reaches pytest's log capture (tests/conftest.py)."""
    from wai_dispatch.service.http.logs import _StderrHandler

    assert any(isinstance(h, _StderrHandler) for h in logging.getLogger("wai_dispatch").handlers)
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    with caplog.at_level(logging.INFO, logger="wai_dispatch.service"):
        logging.getLogger("wai_dispatch.service").info("request", extra={"request_id": "late"})
    assert terminal.getvalue() == ""
    assert [r.getMessage() for r in caplog.records if getattr(r, "request_id", "") == "late"] == [
        "request"
    ]


@pytest.mark.slow  # two worker processes, each with its cold start
def test_workers_share_one_metrics_view(tmp_path: Path) -> None:
    """``serve --workers 2`` under a cold-start burst answers every request (no worker is
    killed for being busy), and whichever worker answers ``/metrics``, it counts every
    worker's decodes (prometheus-client's multiprocess mode)."""
    from wai_dispatch.service.store import bearer
    from wai_dispatch.service.store.report_store import ReportStore

    data = tmp_path / "data"
    data.mkdir()
    store = ReportStore(f"sqlite:///{data / 'reports.db'}")
    store.migrate()
    secret = bearer.create(store, "sink-a", bearer.Role.sink)
    store.dispose()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAI_", "PROMETHEUS"))}
    env |= {"WAI_DATA_DIR": str(data), "WAI_PORT": str(port), "WAI_DECODE_THREADS": "1"}
    with (tmp_path / "serve.log").open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wai_dispatch", "serve", "--workers", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve --workers 2 did not start"
            time.sleep(0.3)
        decodes = 8
        headers = {"Authorization": f"Bearer {secret}"}

        def one(_: int) -> int:  # a fresh connection each: the kernel spreads them
            with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
                return _decode(c).status_code

        # a cold-start burst: every worker's first decodes at once, as soon as it answers
        with ThreadPoolExecutor(decodes) as pool:
            assert list(pool.map(one, range(decodes))) == [200] * decodes
        assert "died" not in (tmp_path / "serve.log").read_text()  # no worker was killed
        time.sleep(1.5)  # every worker's sampler has written
        pids = set()
        for _ in range(6):
            with httpx.Client(base_url=base, timeout=30) as c:
                text = c.get("/metrics").text
            check_exposition(text)
            total = sum(
                s.value
                for f in text_string_to_metric_families(text)
                if f.name == "wai_decodes"
                for s in f.samples
                if s.name == "wai_decodes_total"
            )
            assert total == decodes
            pids |= {
                json.loads(ln)["pid"]
                for ln in (tmp_path / "serve.log").read_text().splitlines()
                if ln.startswith("{") and '"pid"' in ln
            }
        assert len(pids) >= 2  # the supervisor and its workers log with their own pids
        assert (data / "metrics" / str(proc.pid)).is_dir()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert not (data / "metrics" / str(proc.pid)).exists()  # removed when serve stops
