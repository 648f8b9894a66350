"""§5 of WAI Neural Dispatch: the report ``wai-neural-dispatch/1`` — its members, placement,
serialisation, and the validation that rejects malformed and self-contradictory reports."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from wai_dispatch.dispatch import (
    BMSHJ2018,
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    INT_SYNTH,
    KIND,
    NPU_MODEL_RUNTIME,
    REFERENCE_OFFER,
    REGISTRY,
    Arithmetic,
    Capability,
    Code,
    InvalidReport,
    Placement,
    Ran,
    Refusal,
    RegistryClass,
    Report,
    ScriptedAdapter,
    Tier,
    Unit,
    WaiError,
    choose,
)

ENTROPY = Capability(
    "wai.neural.entropy_exact", RegistryClass.NEURAL_ENTROPY_EXACT, Arithmetic.FLOAT
)
WITH_ENTROPY = REGISTRY.with_capability(ENTROPY)


def path(text: str) -> dict[str, str]:
    unit, backend, arithmetic = text.split("/")
    return {"unit": unit, "backend": backend, "arithmetic": arithmetic}


def ran(text: str, tier: str, placement: dict[str, int] | None = None) -> dict[str, Any]:
    return {**path(text), "tier": tier, "placement": placement}


def refused(text: str, reason: str) -> dict[str, str]:
    return {**path(text), "reason": reason}


NPU_PLAN = {"npu": 21, "gpu": 0, "cpu": 0, "unknown": 0}

#: A valid report: bmshj2018 on the reference sink on macOS (§8's evidence row).
GOOD: dict[str, Any] = {
    "kind": KIND,
    "capability": "wai.neural.bmshj2018",
    "needed": "none",
    "ran": ran("npu/model-runtime/float", "none", NPU_PLAN),
    "refused": [],
}

VALID = {
    "npu-ran": GOOD,
    "linux-cpu": {
        **GOOD,
        "ran": ran("cpu/onnx-runtime/float", "none", {"npu": 0, "gpu": 0, "cpu": 16, "unknown": 0}),
        "refused": [refused("npu/model-runtime/float", "dispatch_unit_absent")],
    },
    "webnn-null-placement": {**GOOD, "ran": ran("npu/webnn/float", "none")},
    "int-synth": {
        **GOOD,
        "capability": "wai.neural.int_synth",
        "needed": "decode-equivalence",
        "ran": ran("cpu/wai-ops/integer", "decode-equivalence"),
        "refused": [
            refused("npu/model-runtime/float", "dispatch_tier_refused"),
            refused("cpu/onnx-runtime/float", "dispatch_tier_refused"),
        ],
    },
    "replicate-no-path": {
        **GOOD,
        "needed": "decode-equivalence",
        "ran": None,
        "refused": [
            refused("npu/model-runtime/float", "dispatch_tier_refused"),
            refused("cpu/onnx-runtime/float", "dispatch_tier_refused"),
            refused("cpu/wai-ops/integer", "dispatch_arithmetic_mismatch"),
        ],
    },
    "int-synth-gpu-wgsl": {
        **GOOD,
        "capability": "wai.neural.int_synth",
        "needed": "decode-equivalence",
        "ran": ran(
            "gpu/wgsl/integer", "decode-equivalence", {"npu": 0, "gpu": 9, "cpu": 1, "unknown": 0}
        ),
        "refused": [],
    },
    "unregistered-capability": {
        **GOOD,
        "capability": "wai.neural.someone_elses",
        "ran": ran("gpu/onnx-runtime/float", "none"),
    },
    "empty-refused-no-run": {**GOOD, "ran": None, "refused": []},
}


# §5 members and building -----------------------------------------------------------------------


def test_s5_report_members_exactly_in_order() -> None:
    """§5: kind, capability, needed, ran, refused — nothing else; kind is wai-neural-dispatch/1."""
    adapters = {p: ScriptedAdapter(p, unit=p != NPU_MODEL_RUNTIME) for p in REFERENCE_OFFER}
    obj = choose(BMSHJ2018, Tier.NONE, REFERENCE_OFFER, adapters).report.to_json()
    assert list(obj) == ["kind", "capability", "needed", "ran", "refused"]
    assert obj["kind"] == "wai-neural-dispatch/1" == KIND
    assert obj["capability"] == "wai.neural.bmshj2018"
    assert obj["needed"] == "none"


def test_s5_ran_path_adds_tier_and_placement() -> None:
    """§5: the path in ran is {unit, backend, arithmetic} plus tier and placement."""
    report = Report(
        BMSHJ2018.name, Tier.NONE, Ran(NPU_MODEL_RUNTIME, Tier.NONE, Placement(npu=21)), ()
    )
    assert report.to_json()["ran"] == {
        "unit": "npu",
        "backend": "model-runtime",
        "arithmetic": "float",
        "tier": "none",
        "placement": {"npu": 21, "gpu": 0, "cpu": 0, "unknown": 0},
    }


def test_s5_refused_path_adds_reason_in_offer_order() -> None:
    """§5: every path refused, in the order offered, each with a reason of §7."""
    report = choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, REFERENCE_OFFER, {}).report
    assert report.to_json()["refused"] == [
        refused("npu/model-runtime/float", "dispatch_tier_refused"),
        refused("cpu/onnx-runtime/float", "dispatch_tier_refused"),
        refused("cpu/wai-ops/integer", "dispatch_unit_absent"),
    ]
    assert report.to_json()["ran"] is None


def test_s5_placement_counts_each_unit() -> None:
    """§5: placement is how many operations the plan puts on each unit, unknown included."""
    p = Placement(npu=18, gpu=1, cpu=2, unknown=3)
    assert p.to_json() == {"npu": 18, "gpu": 1, "cpu": 2, "unknown": 3}
    assert [p.on(u) for u in Unit] == [18, 1, 2]
    assert p.total == 24
    assert Placement.from_json(p.to_json()) == p


@pytest.mark.parametrize("bad", [-1, 1.0, True, "3", None])
def test_s5_placement_counts_are_non_negative_ints(bad: object) -> None:
    """§5: a count is an integer >= 0."""
    with pytest.raises(InvalidReport, match=r"placement\.npu"):
        Placement(npu=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(VALID))
def test_s5_valid_reports_round_trip(name: str) -> None:
    """§5: a valid report parses, validates, and serialises back to the same JSON."""
    obj = VALID[name]
    report = Report.from_json(obj)
    assert report.to_json() == obj
    assert Report.loads(report.dumps()) == report
    assert Report.loads(json.dumps(obj).encode()) == report


def test_s5_choose_reports_round_trip() -> None:
    """§5: what choose builds parses back to an equal Report."""
    adapters = {p: ScriptedAdapter(p, unit=p != NPU_MODEL_RUNTIME) for p in REFERENCE_OFFER}
    report = choose(BMSHJ2018, Tier.NONE, REFERENCE_OFFER, adapters).report
    assert Report.from_json(json.loads(report.dumps())) == report


# malformed reports -----------------------------------------------------------------------------


def mutate(**changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is _DROP:
            del obj[key]
        else:
            obj[key] = value
    return obj


_DROP = object()


def _ran_with(**changes: Any) -> dict[str, Any]:
    r = copy.deepcopy(GOOD["ran"])
    for key, value in changes.items():
        if value is _DROP:
            del r[key]
        else:
            r[key] = value
    return mutate(ran=r)


MALFORMED: dict[str, tuple[object, str]] = {
    "not-an-object": ([], "JSON object"),
    "string": ("report", "JSON object"),
    "missing-kind": (mutate(kind=_DROP), "missing"),
    "missing-refused": (mutate(refused=_DROP), "missing"),
    "missing-ran": (mutate(ran=_DROP), "missing"),
    "extra-member": ({**GOOD, "energy_mj": 3}, "unexpected"),
    "wrong-kind": (mutate(kind="wai-neural-dispatch/2"), "kind"),
    "kind-null": (mutate(kind=None), "kind"),
    "capability-empty": (mutate(capability=""), "capability"),
    "capability-not-string": (mutate(capability=7), "capability"),
    "needed-unknown-token": (mutate(needed="bit-exact"), "tier"),
    "needed-not-string": (mutate(needed=2), "tier"),
    "ran-not-object": (mutate(ran="npu/model-runtime/float"), "ran"),
    "ran-missing-tier": (_ran_with(tier=_DROP), "ran"),
    "ran-missing-placement": (_ran_with(placement=_DROP), "ran"),
    "ran-extra-member": (_ran_with(reason="dispatch_unit_absent"), "ran"),
    "ran-unknown-unit": (_ran_with(unit="tpu"), "unit"),
    "ran-unknown-backend": (_ran_with(backend="tensorrt"), "backend"),
    "ran-unknown-arithmetic": (_ran_with(arithmetic="fixed"), "arithmetic"),
    "ran-unknown-tier": (_ran_with(tier="best-effort"), "tier"),
    "placement-not-object": (_ran_with(placement=[21, 0, 0, 0]), "placement"),
    "placement-missing-member": (_ran_with(placement={"npu": 21, "gpu": 0, "cpu": 0}), "placement"),
    "placement-extra-member": (_ran_with(placement={**NPU_PLAN, "tpu": 0}), "placement"),
    "placement-negative": (_ran_with(placement={**NPU_PLAN, "cpu": -1}), "placement"),
    "placement-float": (_ran_with(placement={**NPU_PLAN, "npu": 21.0}), "placement"),
    "placement-bool": (_ran_with(placement={**NPU_PLAN, "gpu": False}), "placement"),
    "refused-not-list": (mutate(refused={}), "refused"),
    "refused-null": (mutate(refused=None), "refused"),
    "refused-item-not-object": (mutate(refused=["cpu/onnx-runtime/float"]), "refused"),
    "refused-missing-reason": (mutate(refused=[path("cpu/onnx-runtime/float")]), "refused"),
    "refused-extra-member": (
        mutate(
            refused=[{**refused("cpu/onnx-runtime/float", "dispatch_unit_absent"), "tier": "none"}]
        ),
        "refused",
    ),
    "refused-unknown-reason": (
        mutate(refused=[refused("cpu/onnx-runtime/float", "dispatch_timeout")]),
        "code",
    ),
    "refused-unknown-unit": (
        mutate(refused=[refused("dsp/onnx-runtime/float", "dispatch_unit_absent")]),
        "unit",
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_s5_malformed_report_rejected(name: str) -> None:
    """§5: a report of another shape is InvalidReport, with a message naming what is wrong."""
    obj, words = MALFORMED[name]
    with pytest.raises(InvalidReport) as info:
        Report.from_json(obj)
    assert words in info.value.message
    assert info.value.code == "invalid_report"
    assert isinstance(info.value, WaiError)


def test_s5_loads_rejects_non_json() -> None:
    """§5: a report is JSON."""
    with pytest.raises(InvalidReport, match="not JSON"):
        Report.loads("{kind:")
    with pytest.raises(InvalidReport, match="not JSON"):
        Report.loads(b"\xff\xfe")


# self-contradictory reports ----------------------------------------------------------------------

DE = "decode-equivalence"
EC = "entropy-consistency"

CONTRADICTIONS: dict[str, tuple[dict[str, Any], str]] = {
    # §3: a float path never runs a decode that needs decode-equivalence.
    "float-ran-at-decode-equivalence": (
        mutate(needed=DE, ran=ran("cpu/onnx-runtime/float", DE)),
        "float path",
    ),
    "float-ran-at-de-on-npu": (
        mutate(needed=DE, ran=ran("npu/model-runtime/float", DE, NPU_PLAN)),
        "float path",
    ),
    "float-ran-needed-de-claims-none": (
        mutate(needed=DE, ran=ran("cpu/onnx-runtime/float", "none")),
        "float path",
    ),
    # §3: a float path holds the registered tier, never more.
    "float-tier-above-registered": (
        mutate(ran=ran("cpu/onnx-runtime/float", EC)),
        "above the registered",
    ),
    "float-claims-de-unregistered": (
        mutate(capability="wai.neural.unregistered", ran=ran("cpu/onnx-runtime/float", DE)),
        "claims",
    ),
    # §3 refusal codes used where §3 does not refuse.
    "tier-refused-on-integer-path": (
        mutate(
            capability="wai.neural.int_synth",
            needed=DE,
            ran=None,
            refused=[refused("cpu/wai-ops/integer", "dispatch_tier_refused")],
        ),
        "only a float path",
    ),
    "tier-refused-needed-none": (
        mutate(refused=[refused("cpu/onnx-runtime/float", "dispatch_tier_refused")]),
        "only a float path",
    ),
    "arithmetic-mismatch-on-float-path": (
        mutate(refused=[refused("cpu/onnx-runtime/float", "dispatch_arithmetic_mismatch")]),
        "integer path",
    ),
    "arithmetic-mismatch-for-integer-capability": (
        mutate(
            capability="wai.neural.int_synth",
            needed=DE,
            ran=None,
            refused=[refused("cpu/wai-ops/integer", "dispatch_arithmetic_mismatch")],
        ),
        "integer path",
    ),
    # §3 is asked first: a path it refuses carries its code.
    "float-at-de-refused-with-device-code": (
        mutate(
            needed=DE,
            ran=None,
            refused=[refused("npu/model-runtime/float", "dispatch_unit_absent")],
        ),
        "dispatch_tier_refused",
    ),
    "integer-for-float-refused-with-device-code": (
        mutate(refused=[refused("cpu/wai-ops/integer", "dispatch_program_absent")]),
        "dispatch_arithmetic_mismatch",
    ),
    # §3: an integer path runs only an integer capability; none names npu.
    "integer-path-ran-float-capability": (
        mutate(ran=ran("cpu/wai-ops/integer", DE)),
        "not integer",
    ),
    "integer-path-on-npu-ran": (
        mutate(
            capability="wai.neural.int_synth", needed=DE, ran=ran("npu/model-runtime/integer", DE)
        ),
        "npu",
    ),
    "integer-path-on-npu-refused": (
        mutate(
            capability="wai.neural.int_synth",
            needed=DE,
            ran=None,
            refused=[refused("npu/webnn/integer", "dispatch_unit_absent")],
        ),
        "npu",
    ),
    "integer-ran-below-needed": (
        mutate(
            capability="wai.neural.int_synth", needed=DE, ran=ran("cpu/wai-ops/integer", "none")
        ),
        "holds only",
    ),
    # §5: a report names each offered path once.
    "duplicate-refused": (
        mutate(
            refused=[
                refused("cpu/onnx-runtime/float", "dispatch_unit_absent"),
                refused("cpu/onnx-runtime/float", "dispatch_program_absent"),
            ]
        ),
        "more than once",
    ),
    "ran-also-refused": (
        mutate(refused=[refused("npu/model-runtime/float", "dispatch_unit_absent")]),
        "more than once",
    ),
    # §5: a plan with nothing on the unit is not a run there.
    "placement-zero-on-ran-unit": (
        mutate(
            ran=ran(
                "npu/model-runtime/float", "none", {"npu": 0, "gpu": 0, "cpu": 21, "unknown": 0}
            )
        ),
        "dispatch_not_placed",
    ),
    "placement-all-zero": (
        mutate(
            ran=ran("cpu/onnx-runtime/float", "none", {"npu": 0, "gpu": 0, "cpu": 0, "unknown": 0})
        ),
        "dispatch_not_placed",
    ),
    # §5: WebNN states no placement; a WebNN run with one contradicts it.
    "webnn-ran-with-placement": (
        mutate(ran=ran("npu/webnn/float", "none", NPU_PLAN)),
        "WebNN states no placement",
    ),
    # Checks that need no registry run for a capability the registry does not hold.
    "unregistered-integer-path-at-none": (
        mutate(
            capability="wai.neural.unregistered",
            needed="none",
            ran=ran("cpu/wai-ops/integer", "none"),
        ),
        "integer path",
    ),
    "unregistered-float-tier-not-needed": (
        mutate(
            capability="wai.neural.unregistered",
            needed="none",
            ran=ran("cpu/onnx-runtime/float", EC),
        ),
        "the decode needs",
    ),
    "unregistered-integer-ran-beside-arithmetic-mismatch": (
        mutate(
            capability="wai.neural.unregistered",
            needed=DE,
            ran=ran("cpu/wai-ops/integer", DE),
            refused=[refused("gpu/wgsl/integer", "dispatch_arithmetic_mismatch")],
        ),
        "dispatch_arithmetic_mismatch",
    ),
    # §2: needed is never below the registered tier.
    "needed-below-registered-int-synth": (
        mutate(capability="wai.neural.int_synth", needed="none", ran=None, refused=[]),
        "below",
    ),
}


@pytest.mark.parametrize("name", list(CONTRADICTIONS))
def test_s5_self_contradictory_report_rejected(name: str) -> None:
    """§2–§5: a report that contradicts the rules is InvalidReport, and says which rule."""
    obj, words = CONTRADICTIONS[name]
    with pytest.raises(InvalidReport) as info:
        Report.from_json(obj)
    assert words in info.value.message


def test_s5_needed_below_registered_entropy_exact() -> None:
    """§2: a NeuralEntropyExact capability's decode needs at least entropy-consistency."""
    obj = mutate(capability=ENTROPY.name, needed="none", ran=ran("cpu/onnx-runtime/float", "none"))
    with pytest.raises(InvalidReport, match="below"):
        Report.from_json(obj, registry=WITH_ENTROPY)
    good = mutate(capability=ENTROPY.name, needed=EC, ran=ran("cpu/onnx-runtime/float", EC))
    assert Report.from_json(good, registry=WITH_ENTROPY).ran is not None
    # float below the registered tier while the decode needs the registered tier
    low = mutate(capability=ENTROPY.name, needed=EC, ran=ran("cpu/onnx-runtime/float", "none"))
    with pytest.raises(InvalidReport, match="holds only"):
        Report.from_json(low, registry=WITH_ENTROPY)


def test_s5_validate_on_built_report() -> None:
    """§5: validate() checks a Report value built in code, not only parsed JSON."""
    bad = Report(
        BMSHJ2018.name,
        Tier.DECODE_EQUIVALENCE,
        Ran(CPU_ONNX_RUNTIME, Tier.NONE, None),
        (Refusal(CPU_WAI_OPS, Code.ARITHMETIC_MISMATCH),),
    )
    with pytest.raises(InvalidReport, match="float path"):
        bad.validate()


def test_s5_unregistered_capability_validated_without_registry_rules() -> None:
    """§5 (our decision): a report over a capability the registry does not hold is checked
    for everything that needs no registration, and is not an UnknownCapability error."""
    obj = copy.deepcopy(VALID["unregistered-capability"])
    assert Report.from_json(obj).capability == "wai.neural.someone_elses"
    obj["ran"] = ran("cpu/onnx-runtime/float", DE)
    obj["needed"] = DE
    with pytest.raises(InvalidReport, match="float path"):
        Report.from_json(obj)


def test_s5_loads_refuses_duplicate_keys() -> None:
    """A report with a member written twice is refused, not read last-one-wins."""
    text = json.dumps(GOOD)
    doubled = text.replace('"needed": "none"', '"needed": "decode-equivalence", "needed": "none"')
    assert doubled != text
    with pytest.raises(InvalidReport, match="duplicate key 'needed'"):
        Report.loads(doubled)
    nested = text.replace('"tier": "none"', '"tier": "none", "tier": "none"')
    with pytest.raises(InvalidReport, match="duplicate key 'tier'"):
        Report.loads(nested)
    assert Report.loads(text).to_json() == GOOD


@pytest.mark.parametrize("bad", ["false", "true", 0, 1, None, [], "yes"])
def test_scripted_adapter_from_json_booleans_are_strict(bad: object) -> None:
    """The string "false" is not true: a scripted answer is a JSON boolean or refused."""
    with pytest.raises(WaiError, match="unit_present"):
        ScriptedAdapter.from_json(CPU_ONNX_RUNTIME, {"unit_present": bad})
    with pytest.raises(WaiError, match="run"):
        ScriptedAdapter.from_json(CPU_ONNX_RUNTIME, {"run": bad})
    adapter = ScriptedAdapter.from_json(CPU_ONNX_RUNTIME, {"unit_present": False, "run": "fail"})
    assert adapter.unit is False and adapter.fails is True
