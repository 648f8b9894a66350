"""The integer capability's conformance corpus (conformance/neural-conformance/): every payload
decodes, through the bundled int-synth set's wai-ops/1 program, to its symbols digest and to
the BLAKE3 of its RGB8 picture, exactly. A changed hash fails naming the payload; golden hashes
change only by regenerating the corpus (its README)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.onnx_engine import OnnxEngine
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.service.decoding.results import rgb_digest
from wai_dispatch.tools.neural_conformance import program_rgb8

CORPUS = neural_conformance_dir()
DOC = json.loads((CORPUS / "corpus.json").read_bytes())
SET = sets_dir() / DOC["set_name"]


@pytest.fixture(scope="module")
def program() -> Program:
    manifest = Manifest.from_bytes((SET / "set.json").read_bytes())
    assert manifest.digest == DOC["set"], "the corpus names another set than the bundled one"
    spec = manifest.facts.to_json()["programs"]["wai-ops"]
    return load_program(
        (SET / spec["file"]).read_bytes(), (SET / spec["weights"]).read_bytes(), rgb8_output=True
    )


@pytest.fixture(scope="module")
def tables() -> EntropyTables:
    manifest = Manifest.from_bytes((SET / "set.json").read_bytes())
    return EntropyTables.from_json((SET / str(manifest.facts.tables)).read_bytes())


@pytest.fixture(scope="module")
def engine(program: Program) -> OnnxEngine:
    return OnnxEngine(program)


def test_the_corpus_is_what_the_issue_asks() -> None:
    shapes = [tuple(p["picture_shape"][:2]) for p in DOC["payloads"]]
    assert len(shapes) >= 5 and len(set(shapes)) == len(shapes)
    assert (512, 768) in shapes  # 768×512
    assert any(h != w for h, w in shapes)
    assert any(p["latent_shape"][3] == 256 for p in DOC["payloads"])  # the width limit's edge
    listed = {p["payload"] for p in DOC["payloads"]} | {"corpus.json", "README.md"}
    # beside its files, one folder per other capability's corpus (the hyperprior's: its own
    # tests, tests/decoding/test_hyperprior_decode.py)
    assert {f.name for f in CORPUS.iterdir() if f.is_file()} == listed
    assert {f.name for f in CORPUS.iterdir() if f.is_dir()} == {"bmshj2018-hyperprior"}


@pytest.mark.parametrize("case", DOC["payloads"], ids=[p["name"] for p in DOC["payloads"]])
def test_payload_decodes_to_its_golden_hashes(
    case: dict[str, Any], tables: EntropyTables, engine: OnnxEngine, program: Program
) -> None:
    name = case["name"]
    symbols = codec_payload.decode((CORPUS / case["payload"]).read_bytes(), tables)
    got = codec_payload.symbols_digest(symbols)
    assert got == case["symbols_digest"], f"{name}: symbols_digest {got} != the corpus's"
    assert list(symbols.shape) == case["latent_shape"], name
    rgb = program_rgb8(engine.run(symbols))
    assert list(rgb.shape) == case["picture_shape"], name
    got = rgb_digest(rgb)
    assert got == case["rgb8_blake3"], (
        f"{name}: the RGB8 output's BLAKE3 is {got}, the corpus says {case['rgb8_blake3']}: "
        "the integer decode changed (regenerate only for a deliberate change: README)"
    )
    if symbols.shape[2] * symbols.shape[3] <= 300:  # the second exact engine, where cheap
        assert rgb_digest(program_rgb8(Engine(program).run(symbols))) == case["rgb8_blake3"], name


def test_a_changed_hash_fails_naming_the_payload(
    tables: EntropyTables, engine: OnnxEngine, program: Program
) -> None:
    case = dict(DOC["payloads"][0], rgb8_blake3="0" * 64)
    with pytest.raises(AssertionError, match=case["name"]):
        test_payload_decodes_to_its_golden_hashes(case, tables, engine, program)


@pytest.mark.tools
@pytest.mark.slow
def test_regeneration_reproduces_the_corpus(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from wai_dispatch.tools.neural_conformance import write_corpus

    write_corpus(tmp_path, SET, log=lambda _m: None)
    for f in sorted(CORPUS.iterdir()):
        if f.is_file() and f.name != "README.md":
            assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f.name
