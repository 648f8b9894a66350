"""The ONNX path's prepared graphs on disk (paths/onnx_cache.py): written once per set digest
and variant under the data directory's cache, read by the next process's first build instead
of rewriting the graph again, and rebuilt when the bytes do not match their record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wai_dispatch.codec.sets import Manifest, SetStore
from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths import onnx_cache
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter

SET = sets_dir() / "bmshj2018-demo-q3"


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    onnx_cache.request_cache_dir(tmp_path)
    yield tmp_path / "cache" / "onnx"
    onnx_cache.request_cache_dir(None)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> SynthesisJob:
    store = SetStore(tmp_path_factory.mktemp("cache") / "sets")
    store.install(SET)
    files = store.open(Manifest.from_bytes((SET / "set.json").read_bytes()).digest)
    latent = np.random.default_rng(0).normal(0, 2, size=(1, 192, 3, 4)).astype(np.float32)
    return SynthesisJob(files, latent)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = OnnxRuntimeAdapter._prepared

    def prepared(self: Any, *args: Any) -> Any:
        calls.append(1)
        return real(self, *args)

    monkeypatch.setattr(OnnxRuntimeAdapter, "_prepared", prepared)
    return calls


def test_the_second_build_reads_the_graph_from_disk(
    cache: Path, job: SynthesisJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    first = OnnxRuntimeAdapter().run(job)
    assert calls == [1]
    (record,) = cache.glob("*.json")
    facts = json.loads(record.read_bytes())
    assert facts["set"] == job.set_files.digest and facts["variant"] == "split"
    assert facts["rewritten"] == 4 and facts["reach"] == [16, 1, 2]
    again = OnnxRuntimeAdapter()  # a new process's adapter: its own program cache
    assert np.array_equal(again.run(job), first)
    assert calls == [1]  # not rewritten again
    assert again.rewritten(job) == 4
    # another variant is another entry
    OnnxRuntimeAdapter(glue="shuffle").run(job)
    assert calls == [1, 1] and len(list(cache.glob("*.json"))) == 2


@pytest.mark.parametrize("damage", ["model", "record", "format"])
def test_a_damaged_entry_is_rebuilt(
    cache: Path, job: SynthesisJob, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    calls = _counting(monkeypatch)
    first = OnnxRuntimeAdapter().run(job)
    (record,) = cache.glob("*.json")
    model = record.with_suffix(".onnx")
    if damage == "model":
        data = bytearray(model.read_bytes())
        data[len(data) // 2] ^= 1
        model.write_bytes(bytes(data))
    elif damage == "record":
        record.write_text("{not json")
    else:
        facts = json.loads(record.read_bytes())
        record.write_text(json.dumps({**facts, "format": "onnx-prepared-0"}))
    assert np.array_equal(OnnxRuntimeAdapter().run(job), first)
    assert calls == [1, 1]
    assert onnx_cache.load(job.set_files.digest, "split") is not None  # written over


def test_no_cache_dir_writes_nothing(tmp_path: Path, job: SynthesisJob) -> None:
    onnx_cache.request_cache_dir(None)
    OnnxRuntimeAdapter().run(job)
    assert onnx_cache.load(job.set_files.digest, "split") is None
    assert not any(tmp_path.rglob("*.onnx"))


def test_the_decoder_keeps_its_cache_in_the_data_dir(tmp_path: Path) -> None:
    from wai_dispatch.service.decoding.decoder import Decoder

    try:
        Decoder.open(tmp_path / "data", offer=["cpu/onnx-runtime/float"], adapters={})
        assert onnx_cache.cache_dir() == tmp_path / "data" / "cache" / "onnx"
    finally:
        onnx_cache.request_cache_dir(None)
