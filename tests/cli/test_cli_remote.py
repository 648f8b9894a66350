"""``decode --url`` and ``report --url``, the sink's client (docs/cli.md): nothing local opened,
retries with backoff and jitter (connection errors, 429 with Retry-After, 502/503/504), the
service's own words, exit 3 when it cannot be reached and 4 when it refuses, and a decode that
survives the service restarting mid-run."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _svc import SAMPLE_JSON, _prepared, free_port, serve

from wai_dispatch.cli import remote
from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK, EXIT_REFUSED, EXIT_UNREACHABLE
from wai_dispatch.cli.http_client import Answer, NotConnected
from wai_dispatch.cli.main import main
from wai_dispatch.cli.remote import (
    MAX_ENVELOPE_BYTES,
    RemoteError,
    RemoteInvalid,
    RemoteUnreachable,
    call,
)
from wai_dispatch.cli.retry import BACKOFF_CAP_S, backoff, http_date, retry_after

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

    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert retry_after("3") == 3.0
    assert retry_after("Tue, 01 Dec 2026 12:00:07 GMT", now=lambda: now) == 7.0
    assert retry_after("Tue, 01 Dec 2026 11:00:00 GMT", now=lambda: now) == 0.0  # past
    assert retry_after("soon") is None and retry_after(None) is None
    assert retry_after("Tue, 01 Foo 2026 12:00:07 GMT") is None
    assert retry_after("100000") == 60.0  # capped


DAYS = [
    "Sun, 06 Nov 1994 08:49:37",
    "Thu, 29 Feb 2024 23:59:59",
    "Sat, 01 Jan 2000 00:00:00",
    "Fri, 31 Dec 2077 12:34:56",
]


@pytest.mark.parametrize("day", DAYS)
def test_http_date_is_the_standard_librarys(day: str) -> None:
    import email.utils

    expected = email.utils.parsedate_to_datetime(day + " GMT").timestamp()
    assert http_date(day + " GMT") == expected


def _scripted(answers: list[Any]) -> Any:
    """A ``send`` that answers from ``answers`` in turn (an exception is raised)."""
    queue = list(answers)

    def send(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> Answer:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return send


def _answer(status: int, body: bytes = b"", **headers: str) -> Answer:
    return Answer(status, {k.lower().replace("_", "-"): v for k, v in headers.items()}, body)


def test_call_retries_connection_errors_and_busy_statuses() -> None:
    answers = [
        NotConnected("refused"),
        _answer(502, b"bad gateway"),
        _answer(503, b'{"error": {"code": "x"}}'),
        _answer(504),
        _answer(429, b"{}", retry_after="2"),
        _answer(200, b'{"fine": true}'),
    ]
    slept: list[float] = []
    send = _scripted(answers)
    status, body = call(
        "http://svc",
        "/v1/decode",
        b"{}",
        content_type="application/json",
        token="t",
        retries=5,
        sleep=slept.append,
        send=send,
    )
    assert (status, body) == (200, {"fine": True})
    assert len(slept) == 5 and slept[4] == 2.0  # Retry-After honoured
    assert all(0.25 <= s <= 8.0 for s in slept[:4])


def test_call_gives_up_as_unreachable() -> None:
    send = _scripted([NotConnected("refused")] * 3)
    with pytest.raises(RemoteUnreachable, match="after 3 attempts"):
        call(
            "http://svc",
            "/v1/decode",
            b"{}",
            content_type="application/json",
            token=None,
            retries=2,
            sleep=lambda s: None,
            send=send,
        )


def test_call_refuses_an_answer_without_json() -> None:
    with pytest.raises(RemoteInvalid, match="answered 200 without JSON"):
        call(
            "http://svc",
            "/v1/decode",
            b"{}",
            content_type="application/json",
            token=None,
            retries=0,
            send=_scripted([_answer(200, b"<html>")]),
        )


def test_the_client_codes_are_the_registrys_and_its_limit_the_codecs() -> None:
    from wai_dispatch.setfacts.limits import Limits
    from wai_dispatch.tools.error_registry import codes

    # every code the client gives its errors: its classes' and the ones it names in place
    source = Path(remote.__file__).read_text(encoding="utf-8")
    given = set(re.findall(r'(?:code|too_large)\s*=\s*"([a-z_]+)"', source))
    assert {RemoteError.code, RemoteUnreachable.code, RemoteInvalid.code} <= given
    assert len(given) >= 11
    assert {str(c) for c in codes()} >= given
    assert Limits().max_envelope_bytes == MAX_ENVELOPE_BYTES


# --- the HTTP client on a real socket ---


@contextmanager
def _raw_server(answer: bytes) -> Iterator[tuple[str, list[bytes]]]:
    """A loopback server that reads one request and writes ``answer`` as it is, then closes."""
    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve_one() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(rest) < length:
                rest += conn.recv(65536)
            got.append(head + b"\r\n\r\n" + rest)
            conn.sendall(answer)

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", got
    finally:
        thread.join(timeout=30)
        server.close()


@pytest.mark.parametrize(
    "answer",
    [
        b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX: y\r\n\r\n{"ok": [1]}',
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4\r\n{"ok\r\n7;x=1\r\n": [1]}\r\n0\r\n\r\n',
        b'HTTP/1.0 200 OK\r\n\r\n{"ok": [1]}',  # to the end of the connection
    ],
    ids=["content-length", "chunked", "until-close"],
)
def test_the_http_client_reads_each_framing(answer: bytes) -> None:
    with _raw_server(answer) as (url, got):
        status, body = call(
            url,
            "/v1/decode?x=1",
            b'{"a": 1}',
            content_type="application/json",
            token="tok",
            retries=0,
        )
    assert (status, body) == (200, {"ok": [1]})
    head, _, sent = got[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/decode?x=1 HTTP/1.1" and sent == b'{"a": 1}'
    assert "Authorization: Bearer tok" in lines and "Connection: close" in lines
    assert any(line.startswith("Host: 127.0.0.1:") for line in lines)


def test_a_413_answered_before_the_body_is_read_is_the_answer_not_retried() -> None:
    """Issue 29, item 8: the service answers a declared length over its cap 413 before it
    reads the body and closes; the client, still sending, meets a reset. The answer already
    received is the answer: one connection, 413 refused (exit 4), never retried."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []
    error = b'{"error": {"code": "body_too_large", "message": "over max_body_bytes"}}'

    def serve() -> None:
        server.settimeout(5)
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 413 Content Too Large\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n%s" % (len(error), error)
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        status, body = call(
            url,
            "/v1/decode",
            b"x" * (32 << 20),
            content_type="application/json",
            token=None,
            retries=3,
            sleep=lambda _: None,
        )
    finally:
        server.close()
        thread.join(timeout=30)
    assert (status, body["error"]["code"], len(accepted)) == (413, "body_too_large", 1)


def test_the_http_client_says_what_is_not_http() -> None:
    with (
        _raw_server(b"SSH-2.0-OpenSSH\r\n\r\n") as (url, _),
        pytest.raises(RemoteUnreachable, match="not an HTTP answer"),
    ):
        call(url, "/", b"{}", content_type="application/json", token=None, retries=0)
    with pytest.raises(RemoteUnreachable, match="not an http"):
        call("ftp://x", "/", b"{}", content_type="application/json", token=None, retries=0)


# --- what a remote command loads ---

#: What no remote command may load: the core, the decoder, the settings model, the runtimes.
HEAVY_ON_THE_CLIENT = (
    "numpy",
    "onnxruntime",
    "pydantic",
    "pydantic_settings",
    "httpx",
    "constriction",
    "blake3",
    "cbor2",
    "sqlalchemy",
)
OURS_ON_THE_CLIENT = {
    "wai_dispatch",
    "wai_dispatch.cli",
    "wai_dispatch.cli.main",
    "wai_dispatch.cli.flags",
    "wai_dispatch.cli.parsers",
    "wai_dispatch.cli.parsers.decode",
    "wai_dispatch.cli.remote",
    "wai_dispatch.cli.http_client",
    "wai_dispatch.cli.retry",
    "wai_dispatch.cli.outcome_text",
    "wai_dispatch.cli.client_settings",
}


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", str(SAMPLE_JSON), "--url", "http://127.0.0.1:9/", "--retries", "0"],
        ["report", str(RUN_REPORT), "--url", "http://127.0.0.1:9/", "--retries", "0"],
    ],
    ids=["decode", "report"],
)
def test_a_remote_command_loads_only_the_client(argv: list[str]) -> None:
    """Issue 26: ``decode --url`` (and ``report``) import the HTTP client and the envelope
    reader, none of the core, the decoder, pydantic or a runtime (an unreachable URL: the
    whole path to the error line)."""
    code = (
        "import sys\nfrom wai_dispatch.cli.main import main\n"
        f"status = main({argv!r})\n"
        "print(status, ','.join(sorted(sys.modules)), file=sys.stdout)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "WAI_TOKEN": "t"},
    )
    status, modules = result.stdout.split()
    loaded = set(modules.split(","))
    assert int(status) == EXIT_UNREACHABLE, result.stderr
    assert "remote_unreachable" in result.stderr
    assert not [m for m in loaded if m.split(".")[0] in HEAVY_ON_THE_CLIENT]
    assert {m for m in loaded if m.startswith("wai_dispatch")} == OURS_ON_THE_CLIENT


# --- against the service ---


def test_decode_url_opens_nothing_local(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sink_dir = tmp_path / "sink-data"
    monkeypatch.setenv("WAI_DATA_DIR", str(sink_dir))
    with serve(tmp_path / "svc") as live:
        status, out, _ = run(
            capsys,
            "decode",
            str(SAMPLE_JSON),
            "--url",
            live.url,
            "--token",
            live.tokens["sink"],
            "-o",
            str(tmp_path / "p.png"),
            "--offer",
            "npu/model-runtime/float",
        )
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
    status, _, err = run(
        capsys, "decode", str(SAMPLE_JSON), "--url", f"http://127.0.0.1:{port}", "--retries", "0"
    )
    assert status == EXIT_UNREACHABLE
    assert err.startswith("wai-dispatch: error: remote_unreachable: ")
    with serve(tmp_path / "svc") as live:
        status, _, err = run(
            capsys, "decode", str(SAMPLE_JSON), "--url", live.url, "--token", "wai_not_a_token"
        )
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
        status, _, err = run(
            capsys, "report", str(RUN_REPORT), "--url", live.url, "--token", live.tokens["sink"]
        )
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
        [
            *CLI,
            "decode",
            str(SAMPLE_JSON),
            "--url",
            f"http://127.0.0.1:{port}",
            "--token",
            token,
            "-o",
            str(out),
            "--retries",
            "8",
            "--timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)  # its first attempts fail: connection refused
    assert proc.poll() is None
    with _service_on(data_dir, port):
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_OK, stderr
    assert out.read_bytes().startswith(b"\x89PNG") and "picture  256×256" in stdout
