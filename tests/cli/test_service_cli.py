"""The service's commands: ``tokens create|list|revoke``, ``decode --url`` (same answer as a
local decode; 429 retried after Retry-After) and ``serve``, whose printed curl decodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _svc import REPLICATE, SAMPLE_CBOR, SAMPLE_JSON, free_port, serve

from wai_dispatch.cli.main import main
from wai_dispatch.cli.remote import call


def test_tokens_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--data-dir", str(tmp_path)]
    assert main(["tokens", "create", "edge-7", "--role", "operator", "--json", *base]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["token"].startswith("wai_") and made["role"] == "operator"
    assert main(["tokens", "list", "--json", *base]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(t["name"], t["role"], t["revoked"]) for t in listed] == [("edge-7", "operator", False)]
    assert made["token"] not in json.dumps(listed)
    assert main(["tokens", "revoke", "edge-7", *base]) == 0
    assert capsys.readouterr().out.strip() == "revoked 1 token(s)"
    assert main(["tokens", "revoke", "edge-7", *base]) == 2
    assert "token_not_found" in capsys.readouterr().err


def test_tokens_revoke_says_when_the_snapshot_is_not_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36, item 4: the spool volume (``WAI_SPOOL_DIR``) not mounted on this host: the
    token is revoked in the store, the snapshot is not rewritten, and the command says so and
    exits 1 (docs/service.md, "The token snapshot")."""
    base = ["--data-dir", str(tmp_path)]
    assert main(["tokens", "create", "edge-7", *base]) == 0
    capsys.readouterr()
    monkeypatch.setenv("WAI_SPOOL_DIR", str(tmp_path / "not-mounted"))
    assert main(["tokens", "revoke", "edge-7", "--json", *base]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["revoked"] == 1 and "is not a folder here" in said["snapshot_not_rewritten"]
    assert not (tmp_path / "not-mounted").exists()


@pytest.mark.parametrize("sample", [SAMPLE_JSON, SAMPLE_CBOR, REPLICATE], ids=lambda p: p.name)
def test_decode_url_answers_as_a_local_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sample: Path
) -> None:
    with serve(tmp_path / "svc") as live:
        status_remote = main(
            [
                "decode",
                str(sample),
                "--json",
                "--url",
                live.url,
                "--token",
                live.tokens["sink"],
                "--data-dir",
                str(tmp_path / "c"),
                "-o",
                str(tmp_path / "remote.png"),
            ]
        )
        remote = json.loads(capsys.readouterr().out)
    status_local = main(
        [
            "decode",
            str(sample),
            "--json",
            "--data-dir",
            str(tmp_path / "c"),
            "-o",
            str(tmp_path / "local.png"),
        ]
    )
    local = json.loads(capsys.readouterr().out)
    assert status_remote == status_local
    remote.pop("request_id")
    for d in (remote, local):
        d.pop("output", None)
    assert remote == local
    if local["decoded"]:
        assert (tmp_path / "remote.png").read_bytes() == (tmp_path / "local.png").read_bytes()


def test_decode_url_retries_429_after_retry_after(tmp_path: Path) -> None:
    slept: list[float] = []
    lock = threading.Lock()

    def sleep(s: float) -> None:
        with lock:
            slept.append(s)
        time.sleep(s)

    with serve(tmp_path, decode_threads=1, queue=0) as live:
        data = SAMPLE_JSON.read_bytes()

        def one(_: int) -> int:
            kind = "application/json"
            token = live.tokens["sink"]
            return call(
                live.url,
                "/v1/decode",
                data,
                content_type=kind,
                token=token,
                retries=30,
                sleep=sleep,
            )[0]

        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(one, range(4)))
    assert statuses == [200, 200, 200, 200]
    assert slept and all(s >= 1 for s in slept)


@pytest.mark.slow
def test_serve_prints_url_token_and_a_curl_that_decodes(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "WAI_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wai_dispatch", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]
        assert lines[0].startswith(f"wai-dispatch serving on http://127.0.0.1:{port}")
        assert lines[1].startswith("admin token: 1 live in the token table")
        assert f"admin token written to {tmp_path / 'admin-token'}" in lines[2]
        curl = lines[4].strip()
        assert curl.startswith("curl ")
        # issue 29: the banner comes once the server listens and is ready, so the curl works
        # the moment it is printed (it printed nothing, exit 7, before)
        out = subprocess.run(["bash", "-c", curl], capture_output=True, text=True)
        assert out.returncode == 0, out
        answer = json.loads(out.stdout)
        assert answer["picture"] == {"width": 256, "height": 256, "format": "png"}
        assert answer["reports"][0]["ran"]["backend"] == "onnx-runtime"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
