"""One Settings, read once (issue 15): no module but the settings module reads a ``WAI_*``
variable; every bad value is named at once, before anything starts; an unknown ``WAI_*``
variable is warned about by name; flags > environment > ``WAI_CONFIG`` file > defaults; and
``serve --workers N`` hands its workers exactly its settings."""

from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wai_dispatch.cli.main import build_parser, main
from wai_dispatch.service import settings as settings_mod
from wai_dispatch.service.settings import (
    HANDOVER_ENV,
    Settings,
    SettingsInvalid,
    hand_over,
    load,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dispatch", "setfacts", "codec", "paths", "service", "cli", "tools")
SETTINGS_MODULE = ROOT / "service" / "settings.py"
#: The sink client's two settings, read without the model (cli/remote.py): these variables only.
CLIENT_SETTINGS_MODULE = ROOT / "cli" / "client_settings.py"
CLIENT_VARIABLES = {"WAI_TOKEN", "WAI_TOKEN_FILE", "WAI_CONFIG"}


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No WAI_* setting of the machine running the tests leaks in."""
    for name in list(os.environ):
        if name.upper().startswith("WAI_") and name not in settings_mod.NOT_SETTINGS:
            monkeypatch.delenv(name)


# --- no module but the settings module reads a WAI_* variable --------------------------------


def _env_reads(source: str) -> list[tuple[int, str]]:
    """``(line, key)`` for each read or write of ``os.environ`` / ``os.getenv`` with a
    ``WAI_``-prefixed key: ``os.environ[K]``, ``os.environ.get(K)`` (and ``setdefault``,
    ``pop``), ``os.getenv(K)``, ``K in os.environ``; ``K`` a literal or a module-level name
    bound to one."""
    tree = ast.parse(source)
    consts = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }

    def key(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return consts.get(node.id)
        if isinstance(node, ast.JoinedStr) and node.values:  # f"WAI_{name}"
            return key(node.values[0])
        return None

    def is_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ"
        )

    found = []
    for node in ast.walk(tree):
        k: str | None = None
        if isinstance(node, ast.Subscript) and is_environ(node.value):
            k = key(node.slice)
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in {"get", "setdefault", "pop"}:
                k = key(node.args[0]) if is_environ(f.value) else None
            elif (isinstance(f, ast.Attribute) and f.attr == "getenv") or (
                isinstance(f, ast.Name) and f.id == "getenv"
            ):
                k = key(node.args[0])
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            k = key(node.left)
        if k is not None and k.upper().startswith("WAI_"):
            found.append((node.lineno, k))
    return found


def test_the_walk_finds_every_form_of_read() -> None:
    source = """
import os
from os import environ, getenv
NAME = "WAI_OFFER"
a = os.environ["WAI_DATA_DIR"]
b = os.environ.get("WAI_PORT", "")
c = os.getenv("WAI_HOST")
d = "WAI_TOKEN" in os.environ
e = os.environ.get(NAME)
os.environ["WAI_QUEUE"] = "3"
os.environ.setdefault("WAI_ORT_THREADS", "1")
f = environ[f"WAI_{c}"]
g = getenv("WAI_PAGE")
h = os.environ.get("XDG_DATA_HOME"), os.environ["HOME"], "OMP_X" in os.environ
"""
    keys = [k for _, k in _env_reads(source)]
    assert keys == [
        "WAI_DATA_DIR", "WAI_PORT", "WAI_HOST", "WAI_TOKEN", "WAI_OFFER", "WAI_QUEUE",
        "WAI_ORT_THREADS", "WAI_", "WAI_PAGE",
    ]  # fmt: skip


def test_only_the_settings_module_reads_wai_variables() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == SETTINGS_MODULE:
                continue
            for line, k in _env_reads(path.read_text(encoding="utf-8")):
                if path == CLIENT_SETTINGS_MODULE and k in CLIENT_VARIABLES:
                    continue
                offenders.append(f"{path.relative_to(ROOT)}:{line} reads {k}")
    assert offenders == []
    assert _env_reads(SETTINGS_MODULE.read_text())  # the walk does see the one reader


# --- every bad value, at once, before anything starts -----------------------------------------


def test_every_bad_value_is_named_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WAI_PORT", "70000")
    monkeypatch.setenv("WAI_QUEUE", "-1")
    monkeypatch.setenv("WAI_ORT_THREADS", "two")
    monkeypatch.setenv("WAI_LOG_LEVEL", "loud")
    monkeypatch.setenv("WAI_TOKEN", "")
    monkeypatch.setenv("WAI_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsInvalid) as err:
        load(data_dir=tmp_path, offer="npu/wai-ops/integer")
    assert err.value.code == "settings_invalid"
    assert err.value.problems == [
        f"WAI_CONFIG names {tmp_path / 'missing.toml'}, which is not a file",
        "port (WAI_PORT) = '70000': Input should be less than or equal to 65535",
        "offer (WAI_OFFER) = 'npu/wai-ops/integer': invalid_offer: path npu/wai-ops/integer: "
        "no integer path names npu in this revision (§3)",
        "queue (WAI_QUEUE) = '-1': Input should be greater than or equal to 0",
        "ort_threads (WAI_ORT_THREADS) = 'two': a count of threads >= 1",
        "log_level (WAI_LOG_LEVEL) = 'loud': one of DEBUG, INFO, WARNING, ERROR",
    ]


def test_the_cli_prints_one_line_per_bad_value_before_any_output(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAI_QUEUE", "many")
    monkeypatch.setenv("WAI_DECODE_TIMEOUT_S", "0")
    monkeypatch.setenv("WAI_DATABASE_URL", "")  # fine: a string
    status = main(["serve", "--port", "0", "--data-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""  # no banner
    assert err.splitlines() == [
        "wai-dispatch: error: settings_invalid: port (WAI_PORT) = '0': "
        "Input should be greater than or equal to 1",
        "wai-dispatch: error: settings_invalid: queue (WAI_QUEUE) = 'many': "
        "Input should be a valid integer, unable to parse string as an integer",
        "wai-dispatch: error: settings_invalid: decode_timeout_s (WAI_DECODE_TIMEOUT_S) = '0': "
        "Input should be greater than 0",
    ]
    assert list(tmp_path.iterdir()) == []  # nothing started


def test_a_secret_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAI_DATABASE_URL", "postgresql://u:hunter2@db/x")
    monkeypatch.setenv("WAI_PORT", "x")
    with pytest.raises(SettingsInvalid) as err:
        load()
    assert "hunter2" not in str(err.value)


# --- an unknown WAI_* variable: a warning naming it --------------------------------------------


def test_an_unknown_variable_is_warned_about_by_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("WAI_PROT", "9000")
    monkeypatch.setenv("WAI_SOMETHING_ELSE", "1")
    monkeypatch.setenv("WAI_REQUIRE_BROWSER", "1")  # the test suite's, not a setting
    lines: list[str] = []
    got = load(warn=lines.append)
    assert got.port == 8080  # ignored, not an error
    assert lines == [
        "WAI_PROT is not a setting of wai-dispatch; ignored (did you mean WAI_PORT?)",
        "WAI_SOMETHING_ELSE is not a setting of wai-dispatch; ignored",
    ]
    with caplog.at_level(logging.WARNING, logger="wai_dispatch.settings"):
        load()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[:2] == [f"{line}" for line in lines]


def test_the_cli_warns_on_stderr_and_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAI_OFER", "cpu/wai-ops/integer")
    status = main(["paths", "--offer", "cpu/wai-ops/integer"])
    out, err = capsys.readouterr()
    assert status == 0 and out.startswith("cpu/wai-ops/integer")
    assert err == (
        "wai-dispatch: warning: WAI_OFER is not a setting of wai-dispatch; ignored "
        "(did you mean WAI_OFFER?)\n"
    )


# --- precedence: flags > environment > WAI_CONFIG file > defaults ------------------------------


def test_flags_over_environment_over_file_over_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "wai.toml"
    config.write_text(
        f'offer = "cpu/wai-ops/integer"\nqueue = 3\nport = 9001\ndata_dir = "{tmp_path / "file"}"\n'
    )
    monkeypatch.setenv("WAI_CONFIG", str(config))
    got = load()
    assert (got.offer, got.queue, got.port) == ("cpu/wai-ops/integer", 3, 9001)
    assert (got.data_dir, got.host) == (tmp_path / "file", "127.0.0.1")  # host: the default
    monkeypatch.setenv("WAI_PORT", "9002")
    monkeypatch.setenv("WAI_OFFER", "cpu/onnx-runtime/float")
    got = load()
    assert (got.offer, got.queue, got.port) == ("cpu/onnx-runtime/float", 3, 9002)
    got = load(port=9003, offer=["gpu/wgsl/integer", "cpu/wai-ops/integer"])
    assert (got.offer, got.queue, got.port) == ("gpu/wgsl/integer,cpu/wai-ops/integer", 3, 9003)
    # The CLI's flags are those overrides: --offer over WAI_OFFER over the file.
    assert main(["paths", "--json", "--offer", "cpu/wai-ops/integer"]) == 0
    assert json.loads(capsys.readouterr().out)["offer"] == ["cpu/wai-ops/integer"]
    assert main(["paths", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offer"] == ["cpu/onnx-runtime/float"]
    args = build_parser().parse_args(["sets", "list", "--data-dir", str(tmp_path / "flag")])
    from wai_dispatch.cli.options import settings

    assert settings(args).data_dir == tmp_path / "flag"
    assert settings(args) is args.settings  # read once


def test_the_remote_token_from_flag_environment_or_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from wai_dispatch.cli.options import settings

    (tmp_path / "t").write_text("from-file\n")
    monkeypatch.setenv("WAI_TOKEN_FILE", str(tmp_path / "t"))
    parse = build_parser().parse_args
    assert settings(parse(["decode", "x.json"])).bearer() == "from-file"
    monkeypatch.setenv("WAI_TOKEN", " from-env ")
    assert settings(parse(["decode", "x.json"])).bearer() == "from-env"
    assert settings(parse(["decode", "x.json", "--token", "flag"])).bearer() == "flag"


@pytest.mark.parametrize(
    ("env", "config", "flags"),
    [
        ({}, None, []),
        ({"WAI_TOKEN": " e "}, None, []),
        ({"WAI_TOKEN": "   ", "WAI_TOKEN_FILE": "t"}, None, []),
        ({"wai_token_file": "t"}, None, []),
        ({}, 'token = "f"\ntoken_file = "t"\n', []),
        ({"WAI_TOKEN": "e"}, 'token_file = "t"\n', []),
        ({}, 'token = "f"\n', ["--token-file", "t"]),
        ({"WAI_TOKEN": "e"}, None, ["--token", "flag"]),
        ({"WAI_TOKEN_FILE": "missing"}, None, ["--token-file", "t"]),
    ],
)
def test_the_clients_token_is_the_settings_token(
    env: dict[str, str],
    config: str | None,
    flags: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``decode --url`` reads its token without the settings model
    (cli/client_settings.py): the same token the model gives, from every source."""
    from wai_dispatch.cli.client_settings import bearer
    from wai_dispatch.cli.options import settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").write_text(" from-file \n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if config is not None:
        (tmp_path / "c.toml").write_text(config)
        monkeypatch.setenv("WAI_CONFIG", str(tmp_path / "c.toml"))
    args = build_parser().parse_args(["decode", "x.json", *flags])
    assert bearer(args.token, args.token_file) == settings(args).bearer()


# --- serve --workers: the workers' settings are the parent's -----------------------------------


def test_serve_hands_its_workers_exactly_its_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from wai_dispatch.cli.options import settings
    from wai_dispatch.cli.serve import serve_settings

    monkeypatch.setenv(HANDOVER_ENV, "restored-after-the-test")
    monkeypatch.delenv(HANDOVER_ENV)
    monkeypatch.setenv("WAI_QUEUE", "5")
    monkeypatch.setenv("WAI_ORT_THREADS", "3")
    argv = ["serve", "--workers", "2", "--port", "9005", "--data-dir", str(tmp_path)]
    args = build_parser().parse_args(argv)
    settings(args)
    parent = serve_settings(args)
    cpus = len(os.sched_getaffinity(0))
    assert (parent.port, parent.queue, parent.data_dir) == (9005, 5, tmp_path)
    assert parent.ort_threads == 3  # set: kept
    assert parent.decode_threads == max(1, cpus // 2)  # not set: each worker its part
    one = build_parser().parse_args(["serve", "--port", "9006"])
    assert serve_settings(one).decode_threads == 0  # one worker: the settings as they are
    hand_over(parent)
    # A worker is a fresh process whose environment may say otherwise: it loads the parent's.
    env = {**os.environ, "WAI_PORT": "1", "WAI_QUEUE": "nine", "WAI_CONFIG": "/nonexistent"}
    worker = subprocess.run(
        [sys.executable, "-c", "from wai_dispatch.service.settings import load\n"
         "print(load().model_dump_json())"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Settings.model_validate_json(worker.stdout) == parent
    assert worker.stderr == ""  # no warning, no error: the parent said them
    # In this process (uvicorn with one worker builds the app here) the same.
    assert load() == parent


def test_a_hand_over_for_a_block_leaves_this_processs_settings_as_they_were(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A tool that starts the service in a thread hands it its settings for the start only:
    afterwards this process loads its own again (a leak here once gave every later test in the
    suite the verifier's offer)."""
    from wai_dispatch.service.settings import handed_over

    monkeypatch.delenv(HANDOVER_ENV, raising=False)
    monkeypatch.setenv("WAI_QUEUE", "3")
    other = load(queue=99, data_dir=tmp_path)
    with handed_over(other):
        assert load().queue == 99
    assert HANDOVER_ENV not in os.environ
    assert load().queue == 3


def test_the_http_parser_and_loop_are_settings_worked_out_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37, item 3: `serve` runs on httptools and uvloop where they are installed, else on
    h11 and asyncio; naming one that is not installed is refused before anything starts, and
    `config` prints what `auto` runs on."""
    monkeypatch.delenv(HANDOVER_ENV, raising=False)
    monkeypatch.setenv("WAI_DATA_DIR", str(tmp_path))
    named = load(data_dir=tmp_path, http="H11", event_loop="asyncio")
    assert (named.http_parser, named.loop_impl) == ("h11", "asyncio")
    for present in (True, False):
        monkeypatch.setattr(settings_mod, "installed", lambda module, p=present: p)
        auto = load(data_dir=tmp_path)
        assert (auto.http, auto.event_loop) == ("auto", "auto")
        assert auto.http_parser == ("httptools" if present else "h11")
        assert auto.loop_impl == ("uvloop" if present else "asyncio")
        assert main(["config", "--json"]) == 0
        shown = {r["name"]: r["value"] for r in json.loads(capsys.readouterr().out)["settings"]}
        assert shown["http"] == f"auto: {auto.http_parser}"
        assert shown["event_loop"] == f"auto: {auto.loop_impl}"
    with pytest.raises(SettingsInvalid) as refused:
        load(data_dir=tmp_path, http="httptools", event_loop="uvloop")
    assert len(refused.value.problems) == 2
    assert "httptools is not installed" in str(refused.value.problems)
