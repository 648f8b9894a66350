"""``wai-dispatch evidence`` (service/decoding/evidence.py) on this machine's real paths: §8's
figures for each path present, the absent ones with their reasons, ``replicate`` refused on
every float path, and the integer paths' corpus hashes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.conformance import sets_dir
from wai_dispatch.paths import onnx as onnx_path

FLOAT_SET = sets_dir() / "bmshj2018-demo-q3"
HYPER_SET = sets_dir() / "bmshj2018-hyperprior-int8-units-demo-q3"
INT_SET = sets_dir() / "int-synth-int8-units-demo-q3"
SYMBOLS = "09c6186a09fd0e7b795a2c99c0594dbfaafadfc0f47af871a26e32bfdfbe5c44"


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (item,) = doc["sets"]
    return {row["path"]: row for row in item["paths"]}


def test_float_set_cli_table_json_and_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "evidence.json"
    data = ["--data-dir", str(tmp_path / "data")]
    assert main(["evidence", "--set", str(FLOAT_SET), "--out", str(out), *data]) == 0
    table = capsys.readouterr().out
    assert "symbols 09c6186a09fd0e7b… vs the CPU reference's 09c6186a09fd0e7b…: equal" in table
    assert (
        "ok   cpu/onnx-runtime/float   ran on cpu, cpu=16, tier none, identical, "
        "0 of 196608 samples differ (at most 0); replicate dispatch_tier_refused"
    ) in table
    assert table.rstrip().endswith("evidence: ok")
    doc = json.loads(out.read_text())
    assert doc["kind"] == "wai-dispatch-evidence/1" and doc["ok"] is True
    (item,) = doc["sets"]
    assert item["symbols_digest"] == item["reference_symbols_digest"] == SYMBOLS
    cpu = rows(doc)["cpu/onnx-runtime/float"]
    assert cpu["placement"] == {"npu": 0, "gpu": 0, "cpu": 16, "unknown": 0}
    assert (cpu["unit"], cpu["tier"], cpu["identical"], cpu["samples_differing"]) == (
        "cpu",
        "none",
        True,
        0,
    )
    assert cpu["samples"] == 256 * 256 * 3 and cpu["bound_holds"] is True
    assert cpu["replicate"] == "dispatch_tier_refused"
    # the integer paths refused for a float capability, by §3's code
    assert rows(doc)["cpu/wai-ops/integer"]["code"] == "dispatch_arithmetic_mismatch"
    assert main(["evidence", "--set", str(FLOAT_SET), "--json", *data]) == 0
    assert json.loads(capsys.readouterr().out) == doc


def test_absent_paths_listed_with_reasons(decoder: Any) -> None:
    by_path = rows(decoder.evidence(FLOAT_SET).to_json())
    assert set(by_path) == {
        "npu/model-runtime/float",
        "cpu/onnx-runtime/float",
        "cpu/wai-ops/integer",
        "gpu/onnx-runtime/float",
        "gpu/wgsl/integer",
    }
    for row in by_path.values():
        if not row["present"]:
            assert row["reason"], row
            assert "ran" not in row
    gpu = by_path["gpu/onnx-runtime/float"]
    if onnx_path.discover().chosen is None:  # here: both providers, each with why
        assert gpu["present"] is False
        assert "CUDAExecutionProvider" in gpu["reason"]
        assert "WebGpuExecutionProvider" in gpu["reason"]


def test_hyperprior_set_at_entropy_consistency(decoder: Any) -> None:
    doc = decoder.evidence(HYPER_SET).to_json()
    (item,) = doc["sets"]
    assert item["symbols_equal"] is True
    cpu = rows(doc)["cpu/onnx-runtime/float"]
    assert cpu["tier"] == "entropy-consistency" and cpu["ok"] is True
    assert cpu["bound_holds"] is None  # the symbols alone decide at this tier (§6.4)
    assert cpu["replicate"] == "dispatch_tier_refused"


def test_integer_set_corpus_hashes_and_no_float_path(decoder: Any) -> None:
    doc = decoder.evidence(INT_SET).to_json()
    assert doc["ok"] is True
    by_path = rows(doc)
    interpreter = by_path["cpu/wai-ops/integer"]
    assert interpreter["tier"] == "decode-equivalence"
    corpus = interpreter["corpus"]
    assert len(corpus) == 6 and all(c["ok"] and c["got"] == c["expected"] for c in corpus)
    for path, row in by_path.items():
        if path.endswith("/float") and row["present"]:
            assert row["ran"] is False and row["code"] == "dispatch_tier_refused"
            assert row["replicate"] == "dispatch_tier_refused"


def test_a_set_folder_that_is_not_one_is_a_typed_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = main(["evidence", "--set", str(tmp_path), "--data-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("wai-dispatch: error: set_file_missing: ") and "Traceback" not in err
