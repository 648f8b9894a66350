"""The service's parts on their own: the spool (order, torn line, bound), the program cache
(byte budget, counters), settings validation, and the error-code → HTTP status table."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.service.decoding.cache import ProgramCache
from wai_dispatch.service.decoding.settings import SettingsInvalid, load
from wai_dispatch.service.http.errors import http_status
from wai_dispatch.service.store.spool import Spool, SpoolFull


def test_spool_replays_in_order_skips_a_torn_line_and_truncates(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1 << 20)
    for i in range(5):
        spool.append([{"id": str(i)}])
    with open(spool.path, "ab") as fh:
        fh.write(b'[{"id": "torn"')  # a crash mid-write: no newline, never acknowledged
        fh.write(b"\n")
    spool.append([{"id": "5"}, {"id": "6"}])
    seen: list[str] = []

    def insert(records: list[dict[str, Any]]) -> int:
        seen.extend(r["id"] for r in records)
        return len(records)

    assert spool.replay(insert) == 7
    assert seen == ["0", "1", "2", "3", "4", "5", "6"]
    assert spool.size() == 0


def test_spool_kept_whole_when_the_store_fails_mid_replay(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=1 << 20)
    for i in range(3):
        spool.append([{"id": str(i)}])
    calls: list[str] = []

    def flaky(records: list[dict[str, Any]]) -> int:
        calls.append(records[0]["id"])
        if len(calls) == 2:
            raise ConnectionError("down")
        return 1

    with pytest.raises(ConnectionError):
        spool.replay(flaky)
    size = spool.size()
    assert size > 0
    assert spool.replay(flaky) == 3  # from the start: the store skips ids it holds
    assert calls == ["0", "1", "0", "1", "2"]


def test_spool_is_bounded(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=64)
    spool.append([{"id": "a" * 20}])
    with pytest.raises(SpoolFull) as err:
        spool.append([{"id": "b" * 40}])
    assert err.value.code == "report_spool_full" and "spool_max_bytes=64" in err.value.message
    assert http_status(err.value.code) == 503
    assert oct(os.stat(spool.path).st_mode & 0o777) == "0o600"


def test_program_cache_evicts_least_recent_by_bytes() -> None:
    sizes = {"a": 40, "b": 40, "c": 40}
    cache = ProgramCache(100, lambda digest, path: sizes[digest])
    view = cache.view("cpu/onnx-runtime/float")
    assert view.get("a") is None
    view["a"] = "A"
    view["b"] = "B"
    assert view.get("a") == "A"  # a is now the most recent
    view["c"] = "C"  # 120 > 100: b goes
    assert (view.get("b"), view.get("a"), view.get("c")) == (None, "A", "C")
    assert (cache.hits, cache.misses, cache.evictions, cache.bytes) == (3, 2, 1, 80)
    assert cache.view("gpu/onnx-runtime/float").get("a") is None  # per (digest, path)


def test_program_cache_is_installed_in_the_onnx_adapter(tmp_path: Path) -> None:
    from wai_dispatch.codec.envelope_read import parse
    from wai_dispatch.conformance import envelopes_dir
    from wai_dispatch.service.http.engine import open_engine

    engine = open_engine(tmp_path, cache_bytes=64 << 20)
    envelope = parse((envelopes_dir() / "bmshj2018-demo-q3.json").read_bytes())
    engine.decode(envelope)
    engine.decode(envelope)
    cache = engine.program_cache
    assert [k[1] for k in cache.entries()] == ["cpu/onnx-runtime/float"]
    assert cache.misses == 1 and cache.hits >= 1 and cache.bytes > 0


def test_settings_are_validated_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAI_QUEUE", "-1")
    with pytest.raises(SettingsInvalid) as err:
        load(data_dir=tmp_path)
    assert err.value.code == "settings_invalid" and "queue" in err.value.message
    monkeypatch.delenv("WAI_QUEUE")
    config = tmp_path / "wai.toml"
    config.write_text("queue = 3\ndecode_timeout_s = 9.5\nmemory_budget_bytes = 134217728\n")
    monkeypatch.setenv("WAI_CONFIG", str(config))
    monkeypatch.setenv("WAI_DECODE_TIMEOUT_S", "4")  # the environment wins over the file
    got = load(data_dir=tmp_path)
    assert (got.queue, got.decode_timeout_s, got.memory_budget_bytes) == (3, 4.0, 1 << 27)
    assert got.url == f"sqlite:///{tmp_path / 'reports.db'}"
    config.write_text("colour = 'red'\n")
    with pytest.raises(SettingsInvalid, match="colour"):
        load(data_dir=tmp_path)
    monkeypatch.setenv("WAI_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsInvalid, match="not a file"):
        load()


def test_every_documented_code_has_a_4xx_or_5xx_status() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "errors.md").read_text()
    codes = set(re.findall(r"^\| `([a-z_]+)`", doc, flags=re.M))
    codes |= set(re.findall(r"`([a-z]+_[a-z_]+)`", doc))
    for code in codes:
        assert 400 <= http_status(code) < 600, code
    assert http_status("envelope_malformed") == 400
    assert http_status("queue_full") == 429
    assert http_status("payload_truncated") == 422
    assert http_status("token_missing") == 401 and http_status("role_forbidden") == 403


def test_the_cli_imports_no_web_stack_unless_serving(tmp_path: Path) -> None:
    """``wai-dispatch`` builds its parser and decodes without FastAPI, uvicorn or SQLAlchemy."""
    import subprocess
    import sys

    from wai_dispatch.conformance import envelopes_dir

    code = (
        "import sys; from wai_dispatch.cli.main import main; "
        f"main(['decode', {str(envelopes_dir() / 'bmshj2018-demo-q3.json')!r}, '--json', "
        f"'--data-dir', {str(tmp_path)!r}]); "
        "heavy = ('fastapi', 'uvicorn', 'sqlalchemy', 'starlette', 'alembic', 'httpx'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "[]"
