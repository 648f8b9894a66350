"""Issue 29, item 6: only paths that can exist. One table (dispatch/offer.py, docs/dispatch.md)
gives each backend its arithmetic and its units; the report parser, offers (``explain --offer``,
``paths --offer``, ``WAI_OFFER``) and the judge (tests/service/governance) refuse any other path,
each with a typed error naming the path and the rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from wai_dispatch.dispatch import Arithmetic, Backend, InvalidOffer, InvalidReport, Report, Unit
from wai_dispatch.dispatch.offer import (
    BACKEND_ARITHMETIC,
    BACKEND_UNITS,
    REFERENCE_OFFER,
    DispatchPath,
    impossible,
    parse_offer,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = json.loads((ROOT / "docs" / "examples" / "run-report.json").read_text())
#: The paths that can exist: every one the project names (docs/dispatch.md's table, spelled out).
POSSIBLE = {
    "npu/model-runtime/float",
    "npu/webnn/float",
    "gpu/webnn/float",
    "cpu/webnn/float",
    "gpu/onnx-runtime/float",
    "cpu/onnx-runtime/float",
    "cpu/wai-ops/integer",
    "gpu/wgsl/integer",
}


def test_the_table_names_every_backend_and_exactly_the_possible_paths() -> None:
    assert set(BACKEND_ARITHMETIC) == set(BACKEND_UNITS) == set(Backend)
    every = [DispatchPath(u, b, a) for u in Unit for b in Backend for a in Arithmetic]
    assert {str(p) for p in every if impossible(p) is None} == POSSIBLE
    assert all(impossible(p) is None for p in REFERENCE_OFFER)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("cpu/wai-ops/float", "cpu/wai-ops/float: wai-ops computes in integer, not float (§1)"),
        ("gpu/wgsl/float", "gpu/wgsl/float: wgsl computes in integer, not float (§1)"),
        ("cpu/model-runtime/integer", "model-runtime computes in float, not integer (§1)"),
        ("gpu/onnx-runtime/integer", "onnx-runtime computes in float, not integer (§1)"),
        ("cpu/model-runtime/float", "model-runtime drives npu, not cpu (§1)"),
        ("npu/onnx-runtime/float", "onnx-runtime drives gpu, cpu, not npu (§1)"),
        ("cpu/wgsl/integer", "wgsl drives gpu, not cpu (§1)"),
    ],
)
def test_an_impossible_path_is_refused_by_offers_and_reports(text: str, why: str) -> None:
    assert why in (impossible(DispatchPath.parse(text)) or "")
    with pytest.raises(InvalidOffer, match="§1"):
        parse_offer([text])
    report = copy.deepcopy(EXAMPLE["decodes"][1]["report"])
    unit, backend, arithmetic = text.split("/")
    report["ran"].update(unit=unit, backend=backend, arithmetic=arithmetic)
    with pytest.raises(InvalidReport) as raised:
        Report.from_json(report)
    assert (
        raised.value.message == f"a path that cannot exist: {impossible(DispatchPath.parse(text))}"
    )
    report = copy.deepcopy(EXAMPLE["decodes"][1]["report"])
    report["refused"][0].update(unit=unit, backend=backend, arithmetic=arithmetic)
    with pytest.raises(InvalidReport, match="cannot exist"):
        Report.from_json(report)
