"""The command line's manners (docs/cli.md): ``--version``, ``-`` for stdin and stdout, the
exit statuses, ``--help`` that loads nothing heavy (its time is ``make bench``'s, not a test's),
an example on every command, ``make-set KIND --help`` without torch, ``paths`` listing every
known path, ``plan`` on the first present path, ``config``, ``doctor``, completion, progress."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _svc import REPLICATE, SAMPLE_CBOR, SAMPLE_JSON

from wai_dispatch.cli import progress
from wai_dispatch.cli.completion import table
from wai_dispatch.cli.flags import COMMANDS, EXIT_NO, EXIT_OK, EXIT_USAGE
from wai_dispatch.cli.main import build_parser, main
from wai_dispatch.dispatch.offer import GPU_WGSL, DispatchPath, impossible
from wai_dispatch.dispatch.tokens import Arithmetic, Backend, Unit
from wai_dispatch.paths.registry import BUILDERS

CLI = [sys.executable, "-m", "wai_dispatch.cli"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--version")
    assert status == EXIT_OK
    assert out.startswith("wai-dispatch ") and len(out.split()) >= 2


# --- '-': standard input and output ---


def test_decode_stdin_to_stdout_writes_no_file_named_dash(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    done = subprocess.run(
        [*CLI, "decode", "-", "-o", "-", "--data-dir", str(data_dir)],
        input=SAMPLE_CBOR.read_bytes(),
        capture_output=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"\x89PNG\r\n\x1a\n")  # the picture, and only it, on stdout
    assert b"(standard input)" in done.stderr and b"standard output" in done.stderr
    assert not (tmp_path / "-").exists()
    local = subprocess.run(
        [
            *CLI,
            "decode",
            str(SAMPLE_CBOR),
            "-o",
            str(tmp_path / "p.png"),
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        timeout=300,
    )
    assert local.returncode == 0
    assert (tmp_path / "p.png").read_bytes() == done.stdout


def test_policy_check_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = Path(__file__).parents[2] / "docs" / "examples"
    policy = docs / "policy.yaml"
    report = (docs / "run-report.json").read_bytes()
    stdin = argparse.Namespace(buffer=io.BytesIO(report))
    monkeypatch.setattr(sys, "stdin", stdin)
    status, out, _ = run(capsys, "policy", "check", "-", "--policy", str(policy), "--json")
    assert status in (EXIT_OK, EXIT_NO)
    assert json.loads(out)["run_report"] == "kiosk-01-2026-11-30-0001"


# --- exit statuses ---


def test_exit_statuses_ok_no_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = ["--data-dir", str(tmp_path)]
    assert run(capsys, "decode", str(SAMPLE_JSON), *base)[0] == EXIT_OK
    # a negative answer: no path offered here can run the replicate intent
    status, out, _ = run(
        capsys, "decode", str(REPLICATE), "--offer", "npu/model-runtime/float", *base
    )
    assert status == EXIT_NO and "no path" in out
    # usage: a bad flag, a missing file
    assert run(capsys, "decode", "--nope")[0] == EXIT_USAGE
    status, _, err = run(capsys, "decode", str(tmp_path / "missing.json"), *base)
    assert status == EXIT_USAGE and err.startswith("wai-dispatch: error: file_unreadable: ")


def test_help_names_every_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--help")
    for line in ("0    ok", "1    a negative answer", "2    usage", "3    no answer", "4    --url"):
        assert line in out


# --- --help: light, and an example on every command ---


def test_command_help_loads_no_settings_decoder_or_runtime() -> None:
    """What makes `COMMAND --help` cost seconds: pydantic (the settings), numpy, the decoder,
    a runtime. The time itself is `make bench` (tools/bench_cli.py)."""
    code = (
        "import sys; from wai_dispatch.cli.main import build_parser\n"
        "from wai_dispatch.cli.flags import COMMANDS\n"
        "for name in COMMANDS: build_parser([name, '--help'])\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'numpy', 'onnxruntime', 'torch', 'sqlalchemy', 'httpx') or "
        "m.startswith('wai_dispatch.service'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == ""


def _leaves(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{prefix}{name}", sub))
                found += _leaves(sub, f"{prefix}{name} ")
    return found


def test_every_command_has_help_and_an_example() -> None:
    leaves = _leaves(build_parser())
    assert {name for name, _ in leaves} >= set(COMMANDS)
    for name, sub in leaves:
        assert sub.description, name
        assert sub.epilog and sub.epilog.startswith("example:\n  wai-dispatch "), name


def test_make_set_help_without_torch(tmp_path: Path) -> None:
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['torch'] = None  # `import torch` fails\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for kind, flag in (
        ("bmshj2018", "--checkpoint"),
        ("int-synth", "--from"),
        ("bmshj2018-hyperprior", "--checkpoint"),
    ):
        done = subprocess.run(
            [*CLI, "make-set", kind, "--help"], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert f"usage: wai-dispatch make-set {kind}" in done.stdout and flag in done.stdout
    # and running it without torch is the typed line
    done = subprocess.run(
        [*CLI, "make-set", "bmshj2018", "--out", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("wai-dispatch: error: tools_missing: ")


# --- paths, plan ---


def test_paths_lists_every_known_path(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAI_OFFER", raising=False)
    status, out, _ = run(capsys, "paths", "--json", "--offer", "cpu/wai-ops/integer")
    assert status == EXIT_OK
    rows = json.loads(out)["paths"]
    listed = [f"{r['path']['unit']}/{r['path']['backend']}/{r['path']['arithmetic']}" for r in rows]
    assert listed[0] == "cpu/wai-ops/integer" and rows[0]["offered"] is True
    assert sorted(listed) == sorted(str(p) for p in BUILDERS)
    wgsl = rows[listed.index(str(GPU_WGSL))]
    assert wgsl["offered"] is False
    assert (wgsl["device"] is None) is (not wgsl["present"])
    status, out, _ = run(capsys, "paths")
    lines = out.splitlines()
    assert len(lines) == len(BUILDERS)
    assert all(line.split()[1] in ("present", "absent") for line in lines)
    assert any("not offered" in line for line in lines)


@pytest.mark.skipif(sys.platform == "darwin", reason="Core ML is present on macOS")
def test_plan_defaults_to_the_first_present_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAI_OFFER", raising=False)
    status, out, _ = run(capsys, "plan", "--data-dir", str(tmp_path), "--json")
    assert status == EXIT_OK, out
    assert json.loads(out)["path"] != {
        "unit": "npu",
        "backend": "model-runtime",
        "arithmetic": "float",
    }


def test_plan_refuses_every_path_no_backend_can_take(capsys: pytest.CaptureFixture[str]) -> None:
    """The 22 unit/backend/arithmetic combinations §1's backend table rules out are refused as
    every other door (an offer, WAI_OFFER) refuses them, before any set is opened."""
    every = [DispatchPath(u, b, a) for u in Unit for b in Backend for a in Arithmetic]
    impossible_paths = [p for p in every if impossible(p) is not None]
    assert len(impossible_paths) == 22
    for path in impossible_paths:
        status, _, err = run(capsys, "plan", "--path", str(path), "--data-dir", "/nonexistent")
        assert status == EXIT_USAGE and "invalid_offer" in err, (path, err)


# --- config, doctor, completion ---


def test_config_says_where_each_setting_came_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "wai.toml"
    config.write_text("queue = 3\nport = 9001\n")
    monkeypatch.setenv("WAI_CONFIG", str(config))
    monkeypatch.setenv("WAI_PORT", "9002")
    monkeypatch.setenv("WAI_TOKEN", "wai_secret_value")
    status, out, _ = run(capsys, "config", "--json", "--data-dir", str(tmp_path / "d"))
    assert status == EXIT_OK
    got = json.loads(out)
    rows = {r["name"]: r for r in got["settings"]}
    assert got["config_file"] == str(config)
    assert (rows["data_dir"]["source"], rows["data_dir"]["value"]) == ("flag", str(tmp_path / "d"))
    assert (rows["port"]["source"], rows["port"]["value"]) == ("env", 9002)
    assert (rows["queue"]["source"], rows["queue"]["value"]) == ("file", 3)
    assert (rows["host"]["source"], rows["host"]["env"]) == ("default", "WAI_HOST")
    assert rows["token"]["value"] == "(set)" and "wai_secret_value" not in out


def test_config_prints_the_values_used_not_the_unset_defaults(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: ``config`` printed ``decode_threads 0`` and ``database_url None``; it prints
    what the service uses (docs/cli.md), and a set secret still only as ``(set)``."""
    from wai_dispatch.dispatch import REFERENCE_OFFER
    from wai_dispatch.service.store.spool_volume import default_replica_id

    cpus = len(os.sched_getaffinity(0))
    data = tmp_path / "d"
    status, out, _ = run(capsys, "config", "--json", "--data-dir", str(data))
    assert status == EXIT_OK
    rows = {r["name"]: r for r in json.loads(out)["settings"]}
    assert rows["decode_threads"]["value"] == cpus == rows["ort_threads"]["value"]
    assert rows["database_url"]["value"] == f"sqlite:///{data / 'reports.db'}"
    assert rows["spool_dir"]["value"] == str(data / "spool")
    assert rows["offer"]["value"] == ",".join(map(str, REFERENCE_OFFER))
    assert rows["replica_id"]["value"] == default_replica_id()
    assert {rows[n]["source"] for n in ("decode_threads", "database_url", "offer")} == {"default"}
    monkeypatch.setenv("WAI_DATABASE_URL", "postgresql://u:hunter2@db/x")
    monkeypatch.setenv("WAI_WORKERS", "2")
    monkeypatch.setenv("WAI_DECODE_THREADS", "3")
    status, out, _ = run(capsys, "config", "--json")
    rows = {r["name"]: r for r in json.loads(out)["settings"]}
    assert rows["database_url"]["value"] == "(set)" and "hunter2" not in out
    assert (rows["decode_threads"]["value"], rows["decode_threads"]["source"]) == (3, "env")
    assert rows["ort_threads"]["value"] == max(1, cpus // 2)  # serve --workers 2's share
    status, text, _ = run(capsys, "config")
    line = next(ln for ln in text.splitlines() if ln.startswith("decode_threads "))
    assert line.split()[1:3] == ["3", "env"]


def test_config_prints_the_offer_serve_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``config``'s offer is the one the service's decoder runs (one rule, ``decoder_offer``):
    on a machine with a hardware GPU, its path after the neural processor's."""
    from wai_dispatch.dispatch.offer import GPU_ONNX_RUNTIME
    from wai_dispatch.paths import registry
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.settings import load

    class Gpu:  # a hardware GPU's adapter, present
        def unit_present(self) -> bool:
            return True

    monkeypatch.setattr(registry, "known_adapters", lambda programs=None: {GPU_ONNX_RUNTIME: Gpu()})
    monkeypatch.delenv("WAI_OFFER", raising=False)
    status, out, _ = run(capsys, "config", "--json", "--data-dir", str(tmp_path))
    assert status == EXIT_OK
    offer = {r["name"]: r for r in json.loads(out)["settings"]}["offer"]["value"]
    chosen = load(data_dir=tmp_path)  # as service/http/app.py's start assembles its decoder
    served = Decoder.assemble(
        **chosen.decoder_args(bundled=False), program_cache_bytes=chosen.program_cache_bytes
    )
    assert offer == ",".join(map(str, served.offer))
    assert str(GPU_ONNX_RUNTIME) in offer.split(",")


def test_doctor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, _ = run(capsys, "doctor", "--json", "--data-dir", str(tmp_path / "fresh"))
    got = json.loads(out)
    assert status == EXIT_OK and got["ok"] is True
    names = [c["check"] for c in got["checks"]]
    assert names[:2] == ["data dir", "report store"] and "paths" in names
    assert "browser" in names and "gpu (WebGPU)" in names
    assert not (tmp_path / "fresh").exists()  # doctor creates nothing
    (tmp_path / "file").write_text("in the way")
    status, out, _ = run(capsys, "doctor", "--data-dir", str(tmp_path / "file"))
    assert status == EXIT_NO
    assert out.splitlines()[0].startswith("FAIL  data dir") and "doctor: problems found" in out


def test_bash_completion_is_valid_and_complete(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "completion", "bash"], capture_output=True, text=True, check=True, timeout=120
    )
    script = tmp_path / "wai.bash"
    script.write_text(done.stdout)
    subprocess.run(["bash", "-n", str(script)], check=True)
    probe = (
        f"source {script}; COMP_WORDS=(wai-dispatch sets ''); COMP_CWORD=2; _wai_dispatch; "
        'echo "${COMPREPLY[@]}"'
    )
    words = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert words.stdout.split()[:5] == ["list", "install", "verify", "remove", "default"]
    assert set(table()[""]) >= set(COMMANDS) | {"--version"}
    assert "--retries" in table()["decode"] and "--timeout" in table()["decode"]


# --- progress ---


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_only() -> None:
    quiet = io.StringIO()
    with progress.bar("verify", stream=quiet) as shown:
        shown.update(1, 2, "set a")
    assert quiet.getvalue() == ""
    tty = _Tty()
    with progress.bar("verify", stream=tty) as shown:
        shown.update(1, 2, "set a")
    drawn = tty.getvalue()
    assert "verify [############............] 1/2" in drawn and "set a" in drawn
    assert drawn.endswith("\r\x1b[K")  # cleared at the end


def test_verify_is_quiet_off_a_terminal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = run(capsys, "verify", "--data-dir", str(tmp_path))
    assert status == EXIT_OK and out.rstrip().endswith("verify: ok")
    assert "\r" not in err and "\x1b" not in err
