"""The dispatch conformance vectors (conformance/dispatch/*.json, format in its README.md):
each runs demand + choose with scripted adapters and must give the expected report exactly.

The expected reports were written from the spec's text, not by running ``choose``: they are
an independent oracle. There is no regeneration switch on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.dispatch import (
    REGISTRY,
    Adapter,
    Arithmetic,
    Capability,
    Code,
    DispatchPath,
    Pin,
    RegistryClass,
    Report,
    ScriptedAdapter,
    choose,
    demand,
    parse_offer,
)

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "dispatch"
FILES = sorted(VECTORS.glob("*.json"))
MEMBERS = {"section", "note", "capability", "intent", "pins", "offer", "adapters", "expected"}
ANSWER_KEYS = {"unit_present", "program_present", "takes_shape", "plan", "run", "output"}


def load(file: Path) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    return obj


def capability_of(spec: str | dict[str, str]) -> Capability:
    if isinstance(spec, str):
        return REGISTRY[spec]
    assert set(spec) == {"name", "registry_class", "networks"}, spec
    return Capability(
        spec["name"], RegistryClass(spec["registry_class"]), Arithmetic(spec["networks"])
    )


def run_vector(vector: dict[str, Any]) -> Report:
    cap = capability_of(vector["capability"])
    pins = [Pin(p["capability"], p["digest"], p.get("tier")) for p in vector["pins"]]
    offer = parse_offer(vector["offer"])
    adapters: dict[DispatchPath, Adapter] = {}
    for key, answers in vector["adapters"].items():
        path = DispatchPath.parse(key)
        assert path in offer, f"adapter for {key}, which is not offered"
        assert set(answers) <= ANSWER_KEYS, f"unknown answer in {key}: {set(answers) - ANSWER_KEYS}"
        assert answers.get("run", "ok") in ("ok", "fail"), key
        # ScriptedAdapter.from_json reads truthiness; a vector must write real booleans.
        for question in ("unit_present", "program_present", "takes_shape"):
            assert isinstance(answers.get(question, True), bool), f"{key}.{question}"
        adapters[path] = ScriptedAdapter.from_json(path, answers)
    needed = demand(cap, intent=vector["intent"], pins=pins)
    return choose(cap, needed, offer, adapters).report


def test_at_least_45_vectors() -> None:
    """The corpus holds at least 45 vectors, named NNN-short-name.json, numbered uniquely."""
    assert len(FILES) >= 45
    numbers = [f.name[:3] for f in FILES]
    assert all(n.isdigit() for n in numbers) and len(set(numbers)) == len(numbers)


def test_every_code_appears() -> None:
    """§7: every one of the seven codes is exercised by some vector."""
    seen = {r["reason"] for f in FILES for r in load(f)["expected"]["refused"]}
    assert seen == {str(c) for c in Code}


def test_spec_section_8_claims_present() -> None:
    """§8: the claims the spec's evidence makes are among the vectors."""
    names = {f.stem[4:] for f in FILES}
    assert {
        "bmshj-pin-decode-equivalence-no-path",
        "bmshj-intent-replicate-no-path",
        "int-synth-reference-offer",
        "bmshj-npu-not-placed-moves-on",
        "bmshj-linux-npu-unit-absent",
        "webnn-all-absent",
    } <= names


@pytest.mark.parametrize("file", FILES, ids=lambda f: f.name)
def test_vector(file: Path) -> None:
    vector = load(file)
    assert set(vector) == MEMBERS, f"{file.name}: members {sorted(vector)}"
    assert vector["section"].startswith("§") and vector["note"]
    report = run_vector(vector)
    assert report.to_json() == vector["expected"]
    # The expected report is itself a valid report (it parses and validates).
    registry = REGISTRY
    if isinstance(vector["capability"], dict):
        registry = REGISTRY.with_capability(capability_of(vector["capability"]))
    assert Report.from_json(vector["expected"], registry=registry) == report


def test_a_wai_ops_adapter_states_its_placement() -> None:
    """The real ``cpu/wai-ops/integer`` adapter always states a plan (every operation on the
    CPU, paths/waiops/adapter.py); a vector whose interpreter runs says so too."""
    for file in FILES:
        vector = load(file)
        answers = vector["adapters"].get("cpu/wai-ops/integer")
        ran = vector["expected"]["ran"]
        if ran is not None and ran["backend"] == "wai-ops":
            assert answers is not None and answers.get("plan") is not None, file.name
            plan = answers["plan"]
            assert plan["cpu"] > 0 and plan["npu"] == plan["gpu"] == 0, file.name
