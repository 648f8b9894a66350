"""The ONNX path's prepared graphs on disk (paths/onnx_cache.py): written once per set digest
and variant under the data directory's cache, read by the next process's first build instead
of rewriting the graph again, and rebuilt when the bytes do not match their record."""

from __future__ import annotations

import dataclasses
import json
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
def cache(tmp_path: Path) -> Path:
    return onnx_cache.cache_dir(tmp_path)


@pytest.fixture(scope="module")
def bare_job(tmp_path_factory: pytest.TempPathFactory) -> SynthesisJob:
    """A job that names no cache folder."""
    store = SetStore(tmp_path_factory.mktemp("cache") / "sets")
    store.install(SET)
    files = store.open(Manifest.from_bytes((SET / "set.json").read_bytes()).digest)
    latent = np.random.default_rng(0).normal(0, 2, size=(1, 192, 3, 4)).astype(np.float32)
    return SynthesisJob(files, latent)


@pytest.fixture
def job(bare_job: SynthesisJob, cache: Path) -> SynthesisJob:
    """The job of a decoder whose cache folder is ``cache``."""
    return dataclasses.replace(bare_job, cache_dir=cache)


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
    assert onnx_cache.load(cache, job.set_files.digest, "split") is not None  # written over


def test_no_cache_dir_writes_nothing(tmp_path: Path, bare_job: SynthesisJob) -> None:
    OnnxRuntimeAdapter().run(bare_job)
    assert onnx_cache.load(None, bare_job.set_files.digest, "split") is None
    assert not any(tmp_path.rglob("*.onnx"))


def test_each_decoder_keeps_its_cache_in_its_data_dir(tmp_path: Path) -> None:
    from wai_dispatch.service.decoding.decoder import Decoder

    a = Decoder.assemble(tmp_path / "a", offer=["cpu/onnx-runtime/float"], adapters={})
    b = Decoder.assemble(tmp_path / "b", offer=["cpu/onnx-runtime/float"], adapters={})
    assert a.cache_dir == tmp_path / "a" / "cache" / "onnx"
    assert b.cache_dir == tmp_path / "b" / "cache" / "onnx"
