"""The service's parts on their own: the spool (order, torn line, bound), the LRU and the
program cache (byte budget, counters), settings validation, and the error-code → HTTP status
table."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.paths.lru import LRU
from wai_dispatch.service.settings import SettingsInvalid, load
from wai_dispatch.service.store.spool import Spool, SpoolFull
from wai_dispatch.tools.error_registry import status as status_of


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
        spool.replay(flaky, batch_records=1)  # one line a transaction, to fail between two
    size = spool.size()
    assert size > 0
    assert spool.replay(flaky, batch_records=1) == 3  # from the start: the store skips ids
    assert calls == ["0", "1", "0", "1", "2"]


def test_spool_is_bounded(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=64)
    spool.append([{"id": "a" * 20}])
    with pytest.raises(SpoolFull) as err:
        spool.append([{"id": "b" * 40}])
    assert err.value.code == "report_spool_full" and "spool_max_bytes=64" in err.value.message
    assert status_of(err.value.code) == 503
    assert oct(os.stat(spool.path).st_mode & 0o777) == "0o600"


def test_lru_evicts_least_recent_by_bytes_and_counts() -> None:
    cache: LRU[tuple[str, str], str] = LRU(100)
    path = "cpu/onnx-runtime/float"
    assert cache.get((path, "a")) is None
    cache.put((path, "a"), "A", 40)
    cache.put((path, "b"), "B", 40)
    assert cache.get((path, "a")) == "A"  # a is now the most recent
    cache.put((path, "c"), "C", 40)  # 120 > 100: b goes
    got = (cache.get((path, "b")), cache.get((path, "a")), cache.get((path, "c")))
    assert got == (None, "A", "C")
    assert (cache.hits, cache.misses, cache.evictions, cache.bytes) == (3, 2, 1, 80)
    assert cache.get(("gpu/onnx-runtime/float", "a")) is None  # per (path, digest)
    assert len(cache) == 2 and (path, "a") in cache and (path, "b") not in cache
    assert cache.entries() == [(path, "a"), (path, "c")]  # least recent first
    assert cache.pop((path, "a")) == "A" and cache.pop((path, "a")) is None
    assert (len(cache), cache.bytes) == (1, 40)
    cache.put((path, "huge"), "H", 1000)  # alone over the budget: kept, the rest evicted
    assert cache.entries() == [(path, "huge")] and cache.bytes == 1000
    cache.clear()
    assert (len(cache), cache.bytes, cache.evictions) == (0, 0, 2)


def test_lru_bounded_by_count_and_replacing_recounts() -> None:
    cache: LRU[str, int] = LRU(max_entries=2)
    for i, key in enumerate("abc"):
        cache.put(key, i, 10)
    assert cache.entries() == ["b", "c"] and cache.evictions == 1 and cache.bytes == 20
    cache.put("b", 5, 3)  # a replaced entry is counted once, as now
    assert cache.entries() == ["c", "b"] and cache.bytes == 13 and cache.evictions == 1
    with pytest.raises(ValueError):
        LRU(max_entries=0)


def test_program_cache_is_shared_by_the_decoders_adapters(tmp_path: Path) -> None:
    from wai_dispatch.codec.envelope import parse
    from wai_dispatch.conformance import envelopes_dir
    from wai_dispatch.service.decoding.decoder import Decoder

    decoder = Decoder.assemble(tmp_path, program_cache_bytes=64 << 20)
    assert decoder.programs.budget_bytes == 64 << 20
    envelope = parse((envelopes_dir() / "bmshj2018-demo-q3.json").read_bytes())
    decoder.decode(envelope)
    decoder.decode(envelope)
    cache = decoder.programs
    (key,) = cache.entries()
    assert key[0] == "cpu/onnx-runtime/float"
    assert cache.misses == 1 and cache.hits >= 1
    files = decoder.opened.loaded(key[1])
    program = files.facts.program("onnx-runtime")
    assert program is not None and program.file is not None and program.weights is not None
    assert cache.bytes == 2 * (len(files.read(program.file)) + len(files.read(program.weights)))


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
    codes = set(re.findall(r"^\| `([a-z_]+)` \| [^|]+ \| \d", doc, flags=re.M))
    assert len(codes) > 90
    for code in codes:
        assert 400 <= (status_of(code) or 0) < 600, code
    assert status_of("envelope_malformed") == 400
    assert status_of("queue_full") == 429
    assert status_of("payload_truncated") == 422
    assert status_of("token_missing") == 401 and status_of("role_forbidden") == 403


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
