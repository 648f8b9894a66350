"""``decode --url`` and ``report --url``, the sink's client (docs/cli.md): nothing local opened,
retries with backoff and jitter (connection errors, 429 with Retry-After, 502/503/504), the
service's own words, exit 3 when it cannot be reached and 4 when it refuses, and a decode that
survives the service restarting mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _svc import SAMPLE_JSON, _prepared, free_port, serve

from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE
from wai_dispatch.cli.main import main
from wai_dispatch.cli.remote import (
    BACKOFF_CAP_S,
    RemoteUnreachable,
    backoff,
    call,
    retry_after,
)

CLI = [sys.executable, "-m", "wai_dispatch.cli"]
RUN_REPORT = Path(__file__).parents[2] / "docs" / "examples" / "run-report.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Status, stdout, and the CLI's own stderr lines (the in-process service logs there too)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, "".join(line for line in err.splitlines(True) if not line.startswith("{"))


# --- the retry loop, alone ---


def test_backoff_grows_is_capped_and_jittered() -> None:
    assert [backoff(a, lambda: 0.0) for a in range(6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    assert [backoff(a, lambda: 1.0) for a in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff(10) <= BACKOFF_CAP_S


def test_retry_after_reads_seconds_and_dates() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after("3") == 3.0
    assert retry_after("Tue, 01 Dec 2026 12:00:07 GMT", now=lambda: now) == 7.0
    assert retry_after("soon") is None and retry_after(None) is None
    assert retry_after("100000") == 60.0  # capped


def _scripted(answers: list[Any]) -> tuple[httpx.MockTransport, list[float]]:
    """A transport that answers from ``answers`` in turn (an exception is raised)."""
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler), []


def test_call_retries_connection_errors_and_busy_statuses() -> None:
    ok = httpx.Response(200, json={"fine": True})
    answers = [
        httpx.ConnectError("refused"),
        httpx.Response(502, text="bad gateway"),
        httpx.Response(503, json={"error": {"code": "x"}}),
        httpx.Response(504, text=""),
        httpx.Response(429, headers={"Retry-After": "2"}, json={}),
        ok,
    ]
    transport, _ = _scripted(answers)
    slept: list[float] = []
    status, body = call("http://svc", "/v1/decode", b"{}", content_type="application/json",
                        token="t", retries=5, sleep=slept.append, transport=transport)  # fmt: skip
    assert (status, body) == (200, {"fine": True})
    assert len(slept) == 5 and slept[4] == 2.0  # Retry-After honoured
    assert all(0.25 <= s <= 8.0 for s in slept[:4])


def test_call_gives_up_as_unreachable() -> None:
    transport, _ = _scripted([httpx.ConnectError("refused")] * 3)
    with pytest.raises(RemoteUnreachable, match="after 3 attempts"):
        call("http://svc", "/v1/decode", b"{}", content_type="application/json", token=None,
             retries=2, sleep=lambda s: None, transport=transport)  # fmt: skip


# --- against the service ---


def test_decode_url_opens_nothing_local(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sink_dir = tmp_path / "sink-data"
    monkeypatch.setenv("WAI_DATA_DIR", str(sink_dir))
    with serve(tmp_path / "svc") as live:
        status, out, _ = run(capsys, "decode", str(SAMPLE_JSON), "--url", live.url,
                             "--token", live.tokens["sink"], "-o", str(tmp_path / "p.png"),
                             "--offer", "npu/model-runtime/float")  # fmt: skip
    assert status == EXIT_OK
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")
    assert not sink_dir.exists()  # no store, no bundled sets written on the sink
    # the service's reasons as it gave them: its code and §7's meaning, not this machine's
    # adapter's words ("Core ML needs macOS …")
    assert "dispatch_unit_absent" in out and "Core ML needs" not in out


def test_remote_errors_exit_3_or_4_in_the_service_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    status, _, err = run(capsys, "decode", str(SAMPLE_JSON), "--url", f"http://127.0.0.1:{port}",
                         "--retries", "0")  # fmt: skip
    assert status == EXIT_UNREACHABLE
    assert err.startswith("wai-dispatch: error: remote_unreachable: ")
    with serve(tmp_path / "svc") as live:
        status, _, err = run(capsys, "decode", str(SAMPLE_JSON), "--url", live.url,
                             "--token", "wai_not_a_token")  # fmt: skip
        assert status == EXIT_REFUSED
        assert err.startswith("wai-dispatch: error: token_unknown: ")
        assert err.count("token_unknown") == 1  # never `token_unknown: token_unknown: …`
        status, _, err = run(capsys, "decode", str(SAMPLE_JSON), "--url", live.url)
        assert status == EXIT_REFUSED and "token_missing" in err


def test_report_url_posts_a_run_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_report = json.loads(RUN_REPORT.read_text())
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({**run_report, "sink": "sink-a"}))
    policy = RUN_REPORT.parent / "policy.yaml"
    assert main(["policy", "set", str(policy), "--data-dir", str(tmp_path / "svc")]) == 0
    capsys.readouterr()
    with serve(tmp_path / "svc") as live:
        argv = ["report", str(mine), "--url", live.url, "--token", live.tokens["sink"], "--json"]
        status, out, _ = run(capsys, *argv)
        verdict = json.loads(out)
        assert status == (EXIT_OK if verdict["accepted"] else EXIT_NO)
        assert verdict["run_report"] == run_report["id"] and verdict["sink"] == "sink-a"
        status, out, _ = run(capsys, *argv[:-1])  # again: the same verdict, replayed
        assert "submitted before" in out.splitlines()[0]
        # another sink's report under this token: the service refuses it, in its words
        status, _, err = run(capsys, "report", str(RUN_REPORT), "--url", live.url,
                             "--token", live.tokens["sink"])  # fmt: skip
        assert status == EXIT_REFUSED and "run_report_sink_mismatch" in err


@contextmanager
def _service_on(data_dir: Path, port: int) -> Iterator[None]:
    import uvicorn

    app, _ = _prepared(data_dir, port)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.mark.slow
def test_decode_url_survives_a_restart_of_the_service(tmp_path: Path) -> None:
    """The service goes down while the sink's decode runs and comes back on the same port: the
    decode's connection errors are retried with backoff, and it succeeds."""
    data_dir, port = tmp_path / "svc", free_port()
    with _service_on(data_dir, port):
        token = (data_dir / "admin-token").read_text().strip()
    # down now: the decode starts against no one
    out = tmp_path / "p.png"
    proc = subprocess.Popen(
        [*CLI, "decode", str(SAMPLE_JSON), "--url", f"http://127.0.0.1:{port}", "--token", token,
         "-o", str(out), "--retries", "8", "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)  # its first attempts fail: connection refused
    assert proc.poll() is None
    with _service_on(data_dir, port):
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_OK, stderr
    assert out.read_bytes().startswith(b"\x89PNG") and "picture  256×256" in stdout
