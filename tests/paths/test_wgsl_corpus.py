"""Every payload of the integer capability's conformance corpus (conformance/neural-conformance/)
decoded through the WGSL kernels gives the corpus's RGB8 hash, on whatever WebGPU adapter this
machine has (Mesa's lavapipe in CI): the ``gpu/wgsl/integer`` path's claim to
``decode-equivalence`` (§3). Four payloads by default, every one with ``WAI_FULL_CORPUS=1``."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

pytest.importorskip("wgpu", reason="wgpu (wgpu-py) is not installed: pip install wgpu")

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.paths.wgsl.execute import run_program
from wai_dispatch.paths.wgsl.runner import Runner
from wai_dispatch.service.decoding.results import rgb_digest
from wai_dispatch.tools.neural_conformance import program_rgb8

CORPUS = neural_conformance_dir()
DOC = json.loads((CORPUS / "corpus.json").read_bytes())
SET = sets_dir() / DOC["set_name"]
MANIFEST = Manifest.from_bytes((SET / "set.json").read_bytes())


@pytest.fixture(scope="module")
def runner(wgpu_device: Runner) -> Runner:
    return wgpu_device  # tests/paths/conftest.py


@pytest.fixture(scope="module")
def program() -> Program:
    assert MANIFEST.digest == DOC["set"], "the corpus names another set than the bundled one"
    spec = MANIFEST.facts.program("wai-ops")
    assert spec is not None and spec.file and spec.weights
    return load_program(
        (SET / spec.file).read_bytes(), (SET / spec.weights).read_bytes(), rgb8_output=True
    )


@pytest.fixture(scope="module")
def constants() -> dict[tuple[str, str], Any]:
    return {}  # the weight buffers, uploaded once for every payload (one set, one device)


#: On lavapipe (two shared cores) the payloads take 0.1 s to 1.5 min each; a run checks these
#: four (CI too: the smallest, a 256² picture, the extreme symbols, the 4096-wide strip), and
#: WAI_FULL_CORPUS=1 (`make bench`'s long run, which adds 448×288 and 768×512) every one.
QUICK = ["chelsea-16x16", "coffee-256x256", "extreme-symbols-320x192", "coffee-strip-4096x16"]
CASES = [
    p for p in DOC["payloads"] if os.environ.get("WAI_FULL_CORPUS") == "1" or p["name"] in QUICK
]


def test_the_quick_payloads_are_in_the_corpus() -> None:
    assert sorted(p["name"] for p in DOC["payloads"] if p["name"] in QUICK) == sorted(QUICK)


@pytest.mark.parametrize("case", CASES, ids=[p["name"] for p in CASES])
@pytest.mark.slow
def test_payload_through_the_kernels_gives_the_corpus_hash(
    case: dict[str, Any], runner: Runner, program: Program, constants: dict[tuple[str, str], Any]
) -> None:
    tables = EntropyTables.from_json((SET / str(MANIFEST.facts.tables)).read_bytes())
    symbols = codec_payload.decode((CORPUS / case["payload"]).read_bytes(), tables)
    rgb = program_rgb8(run_program(runner, program, symbols, constants))
    assert list(rgb.shape) == case["picture_shape"]
    got = rgb_digest(rgb)
    assert got == case["rgb8_blake3"], (
        f"{case['name']}: the WGSL kernels' RGB8 BLAKE3 is {got}, the corpus says "
        f"{case['rgb8_blake3']} (adapter: {runner.describe()})"
    )
