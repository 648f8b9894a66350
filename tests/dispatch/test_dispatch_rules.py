"""§2–§4 and §7 of WAI Neural Dispatch, one test (or parametrized group) per rule sentence:
``demand`` (§2), ``admit``/``held_tier`` (§3), ``choose`` and the adapter protocol (§4), the
codes (§7). Report tests live in test_dispatch_report.py."""

from __future__ import annotations

from typing import Any

import pytest

from wai_dispatch.dispatch import (
    BMSHJ2018,
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    INT_SYNTH,
    NPU_MODEL_RUNTIME,
    REFERENCE_OFFER,
    REGISTRY,
    Adapter,
    Arithmetic,
    Backend,
    BackendFailed,
    Capability,
    Code,
    DispatchPath,
    InvalidOffer,
    Pin,
    Placement,
    RegistryClass,
    ScriptedAdapter,
    Tier,
    Unit,
    UnknownCapability,
    admit,
    choose,
    demand,
    held_tier,
    parse_offer,
)
from wai_dispatch.dispatch.offer import GPU_ONNX_RUNTIME, GPU_WGSL, NPU_WEBNN
from wai_dispatch.dispatch.registry import REGISTERED_TIER

ENTROPY = Capability(
    "wai.neural.entropy_exact", RegistryClass.NEURAL_ENTROPY_EXACT, Arithmetic.FLOAT
)
CAPABILITIES = [BMSHJ2018, ENTROPY, INT_SYNTH]
FLOAT_PATHS = [DispatchPath(u, b, Arithmetic.FLOAT) for u in Unit for b in Backend]
INTEGER_PATHS = [
    DispatchPath(u, b, Arithmetic.INTEGER) for u in (Unit.CPU, Unit.GPU) for b in Backend
]


def scripted(
    offer: tuple[DispatchPath, ...], **answers: dict[str, Any]
) -> dict[DispatchPath, ScriptedAdapter]:
    """One ScriptedAdapter per offered path; ``answers`` keyed by str(path) with '/'→'_'."""
    return {
        p: ScriptedAdapter(p, **answers.get(str(p).replace("/", "_").replace("-", "_"), {}))
        for p in offer
    }


# §2 — the tier a decode needs ------------------------------------------------------------------


def test_s2_trigger1_registered_decode_equivalence_needs_decode_equivalence() -> None:
    """§2.1: a NeuralIntegerExact capability needs decode-equivalence, whatever else holds."""
    assert demand(INT_SYNTH) is Tier.DECODE_EQUIVALENCE
    assert demand(INT_SYNTH, intent="view", pins=[Pin(INT_SYNTH.name, "d", "none")]) is (
        Tier.DECODE_EQUIVALENCE
    )


@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: c.name)
def test_s2_trigger2_intent_replicate_needs_decode_equivalence(cap: Capability) -> None:
    """§2.2: intent = replicate demands decode-equivalence for every capability."""
    assert demand(cap, intent="replicate") is Tier.DECODE_EQUIVALENCE


@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: c.name)
def test_s2_trigger3_pin_tier_decode_equivalence_raises_need(cap: Capability) -> None:
    """§2.3: the pin over C's parameter set stating decode-equivalence."""
    pins = [Pin(cap.name, "blake3:00", "decode-equivalence")]
    assert demand(cap, pins=pins) is Tier.DECODE_EQUIVALENCE


def test_s2_pin_among_several_pins_is_found() -> None:
    """§2.3: the pin over C may sit among pins over other capabilities."""
    pins = [Pin("wai.other", "a", None), Pin(BMSHJ2018.name, "b", "decode-equivalence")]
    assert demand(BMSHJ2018, pins=pins) is Tier.DECODE_EQUIVALENCE


def test_s2_otherwise_entropy_exact_needs_entropy_consistency() -> None:
    """§2: otherwise a NeuralEntropyExact capability needs entropy-consistency."""
    assert demand(ENTROPY) is Tier.ENTROPY_CONSISTENCY
    assert demand(ENTROPY, intent=None, pins=[]) is Tier.ENTROPY_CONSISTENCY


def test_s2_otherwise_every_other_class_needs_none() -> None:
    """§2: otherwise every other capability (registry class ``Neural``) needs none."""
    assert demand(BMSHJ2018) is Tier.NONE
    assert REGISTERED_TIER[RegistryClass.NEURAL] is Tier.NONE


@pytest.mark.parametrize("token", ["none", "entropy-consistency", None])
@pytest.mark.parametrize("cap", [BMSHJ2018, ENTROPY], ids=lambda c: c.name)
def test_s2_pin_other_tier_tokens_add_nothing(cap: Capability, token: str | None) -> None:
    """§2: a pin's other tokens add nothing (even entropy-consistency on a Neural capability)."""
    assert demand(cap, pins=[Pin(cap.name, "d", token)]) is cap.registered_tier


@pytest.mark.parametrize(
    "token",
    [
        "Decode-Equivalence",
        "decode_equivalence",
        "decode-equivalence ",
        "bit-exact",
        "",
        "replicate",
    ],
)
def test_s2_unknown_pin_tier_token_adds_nothing(token: str) -> None:
    """§2: a token the vocabulary does not register adds nothing (and is no error)."""
    assert demand(BMSHJ2018, pins=[Pin(BMSHJ2018.name, "d", token)]) is Tier.NONE
    assert demand(ENTROPY, pins=[Pin(ENTROPY.name, "d", token)]) is Tier.ENTROPY_CONSISTENCY


def test_s2_fallback_reads_no_pin_of_the_primary() -> None:
    """§2: a pin applies to the capability it pins; a decode through the fallback reads no
    pin of the primary's."""
    primary_pin = Pin(INT_SYNTH.name, "blake3:primary", "decode-equivalence")
    assert demand(BMSHJ2018, pins=[primary_pin]) is Tier.NONE
    assert demand(ENTROPY, pins=[Pin(BMSHJ2018.name, "d", "decode-equivalence")]) is (
        Tier.ENTROPY_CONSISTENCY
    )


@pytest.mark.parametrize("intent", ["view", "archive", "", "REPLICATE", "replicate "])
def test_s2_other_intents_change_nothing(intent: str) -> None:
    """§2.2: only replicate raises the need; other intents are carried and change nothing."""
    assert demand(BMSHJ2018, intent=intent) is Tier.NONE
    assert demand(ENTROPY, intent=intent) is Tier.ENTROPY_CONSISTENCY


def test_s2_tier_order() -> None:
    """§2: none < entropy-consistency < decode-equivalence."""
    assert Tier.NONE < Tier.ENTROPY_CONSISTENCY < Tier.DECODE_EQUIVALENCE
    assert max(Tier) is Tier.DECODE_EQUIVALENCE
    assert sorted([Tier.DECODE_EQUIVALENCE, Tier.NONE, Tier.ENTROPY_CONSISTENCY]) == list(Tier)


# §3 — which paths may run it -------------------------------------------------------------------


@pytest.mark.parametrize("path", FLOAT_PATHS, ids=str)
@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: c.name)
def test_s3_float_path_refused_for_decode_equivalence_on_every_unit(
    path: DispatchPath, cap: Capability
) -> None:
    """§3: a float path MUST NOT run a decode that needs decode-equivalence, whichever unit it
    names, the CPU included (dispatch_tier_refused)."""
    assert admit(path, Tier.DECODE_EQUIVALENCE, cap) is Code.TIER_REFUSED


@pytest.mark.parametrize("path", FLOAT_PATHS, ids=str)
@pytest.mark.parametrize("needed", [Tier.NONE, Tier.ENTROPY_CONSISTENCY])
@pytest.mark.parametrize("cap", [BMSHJ2018, ENTROPY], ids=lambda c: c.name)
def test_s3_float_path_may_run_any_other_decode(
    path: DispatchPath, needed: Tier, cap: Capability
) -> None:
    """§3: a float path MAY run any other decode."""
    assert admit(path, needed, cap) is None


@pytest.mark.parametrize("path", FLOAT_PATHS, ids=str)
@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: c.name)
def test_s3_float_path_holds_registered_tier_never_more(
    path: DispatchPath, cap: Capability
) -> None:
    """§3: the decode holds C's registered tier, never more (a neural processor's output is
    that device's reconstruction)."""
    assert held_tier(path, cap) is cap.registered_tier


def test_s3_float_path_holds_registered_tier_even_when_more_was_asked() -> None:
    """§3: a float path run where the envelope asked nothing more still reports the registered
    tier: entropy-consistency for NeuralEntropyExact, none for Neural."""
    for cap in (BMSHJ2018, ENTROPY):
        offer = (CPU_ONNX_RUNTIME,)
        report = choose(cap, demand(cap), offer, scripted(offer)).report
        assert report.ran is not None
        assert report.ran.tier is cap.registered_tier


@pytest.mark.parametrize("path", INTEGER_PATHS, ids=str)
@pytest.mark.parametrize("cap", [BMSHJ2018, ENTROPY], ids=lambda c: c.name)
@pytest.mark.parametrize("needed", list(Tier))
def test_s3_integer_path_refused_for_float_networks(
    path: DispatchPath, cap: Capability, needed: Tier
) -> None:
    """§3: an integer path runs only an integer capability; offered for another it is refused
    (dispatch_arithmetic_mismatch), whatever tier the decode needs."""
    assert admit(path, needed, cap) is Code.ARITHMETIC_MISMATCH


@pytest.mark.parametrize("path", INTEGER_PATHS, ids=str)
def test_s3_integer_path_runs_integer_capability_at_decode_equivalence(path: DispatchPath) -> None:
    """§3: an integer path runs a capability registered at decode-equivalence and holds
    decode-equivalence (CPU always; GPU under *Claiming the tier on a GPU*)."""
    assert admit(path, Tier.DECODE_EQUIVALENCE, INT_SYNTH) is None
    assert held_tier(path, INT_SYNTH) is Tier.DECODE_EQUIVALENCE


def test_s3_only_integer_exact_class_has_integer_networks() -> None:
    """§3: only a capability registered at decode-equivalence has integer networks."""
    with pytest.raises(ValueError, match="cannot have"):
        Capability("x", RegistryClass.NEURAL, Arithmetic.INTEGER)
    with pytest.raises(ValueError, match="cannot have"):
        Capability("x", RegistryClass.NEURAL_INTEGER_EXACT, Arithmetic.FLOAT)
    with pytest.raises(ValueError, match="cannot have"):
        Capability("x", RegistryClass.NEURAL_ENTROPY_EXACT, Arithmetic.INTEGER)


@pytest.mark.parametrize("backend", list(Backend))
def test_s3_no_integer_path_names_npu(backend: Backend) -> None:
    """§3: no integer path names npu in this revision: such an offer is refused."""
    path = DispatchPath(Unit.NPU, backend, Arithmetic.INTEGER)
    with pytest.raises(InvalidOffer, match="npu"):
        parse_offer([path])
    with pytest.raises(InvalidOffer, match="npu"):
        parse_offer([str(path)])
    with pytest.raises(InvalidOffer):
        choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, (path,), {path: ScriptedAdapter(path)})


def test_s3_entropy_stage_same_for_every_path_at_entropy_consistency() -> None:
    """§3: at entropy-consistency every float path holds the same tier (the entropy stage
    runs on the CPU in integers whichever path runs the networks)."""
    tiers = {held_tier(p, ENTROPY) for p in FLOAT_PATHS}
    assert tiers == {Tier.ENTROPY_CONSISTENCY}


# §4 — the choice -------------------------------------------------------------------------------


def test_s4_refused_path_is_not_tried() -> None:
    """§4.1: a path §3 refuses is not tried: its adapter is asked nothing."""
    offer = REFERENCE_OFFER
    adapters = scripted(offer)
    decision = choose(INT_SYNTH, Tier.DECODE_EQUIVALENCE, offer, adapters)
    assert adapters[NPU_MODEL_RUNTIME].calls == []
    assert adapters[CPU_ONNX_RUNTIME].calls == []
    assert adapters[CPU_WAI_OPS].calls == [
        "unit_present",
        "program_present",
        "takes_shape",
        "plan",
        "run",
    ]
    assert decision.ran == CPU_WAI_OPS


def test_s4_arithmetic_mismatch_path_is_not_tried() -> None:
    """§4.1: an integer path offered for a float capability is refused without a question."""
    offer = (CPU_WAI_OPS, CPU_ONNX_RUNTIME)
    adapters = scripted(offer)
    report = choose(BMSHJ2018, Tier.NONE, offer, adapters).report
    assert adapters[CPU_WAI_OPS].calls == []
    assert [r.reason for r in report.refused] == [Code.ARITHMETIC_MISMATCH]


@pytest.mark.parametrize(
    ("answers", "code", "calls"),
    [
        ({"unit": False}, Code.UNIT_ABSENT, ["unit_present"]),
        ({"program": False}, Code.PROGRAM_ABSENT, ["unit_present", "program_present"]),
        (
            {"shape": False},
            Code.SHAPE_MISMATCH,
            ["unit_present", "program_present", "takes_shape"],
        ),
        (
            {"placement": Placement(cpu=21)},
            Code.NOT_PLACED,
            ["unit_present", "program_present", "takes_shape", "plan"],
        ),
        (
            {"fails": True},
            Code.BACKEND_FAILED,
            ["unit_present", "program_present", "takes_shape", "plan", "run"],
        ),
        # A 'no' to an early question hides every later answer.
        ({"unit": False, "program": False, "fails": True}, Code.UNIT_ABSENT, ["unit_present"]),
        (
            {"program": False, "shape": False, "placement": Placement()},
            Code.PROGRAM_ABSENT,
            ["unit_present", "program_present"],
        ),
        (
            {"shape": False, "placement": Placement(), "fails": True},
            Code.SHAPE_MISMATCH,
            ["unit_present", "program_present", "takes_shape"],
        ),
        (
            {"placement": Placement(gpu=3), "fails": True},
            Code.NOT_PLACED,
            ["unit_present", "program_present", "takes_shape", "plan"],
        ),
    ],
)
def test_s4_questions_in_order_stop_at_first_no(
    answers: dict[str, Any], code: Code, calls: list[str]
) -> None:
    """§4.2–4.3: unit, program, shape, plan, then run; the first 'no' refuses the path with its
    code, the next path is tried."""
    first = NPU_MODEL_RUNTIME
    offer = (first, CPU_ONNX_RUNTIME)
    adapters = {
        first: ScriptedAdapter(first, **answers),
        CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME),
    }
    decision = choose(BMSHJ2018, Tier.NONE, offer, adapters)
    assert adapters[first].calls == calls
    assert [(r.path, r.reason) for r in decision.report.refused] == [(first, code)]
    assert decision.ran == CPU_ONNX_RUNTIME


def test_s4_first_path_that_runs_wins_later_adapters_never_asked() -> None:
    """§4: the first path that runs is the decode's; later paths are never asked."""
    offer = (GPU_ONNX_RUNTIME, CPU_ONNX_RUNTIME, NPU_WEBNN)
    adapters = scripted(offer)
    adapters[GPU_ONNX_RUNTIME].output = "gpu-out"
    decision = choose(BMSHJ2018, Tier.NONE, offer, adapters)
    assert decision.ran == GPU_ONNX_RUNTIME
    assert decision.output == "gpu-out"
    assert decision.report.refused == ()
    assert adapters[CPU_ONNX_RUNTIME].calls == []
    assert adapters[NPU_WEBNN].calls == []


def test_s4_offer_order_is_the_sinks() -> None:
    """§4: the sink offers its paths in an order of its choosing; choose follows it."""
    offer = (CPU_ONNX_RUNTIME, NPU_MODEL_RUNTIME)
    decision = choose(BMSHJ2018, Tier.NONE, offer, scripted(offer))
    assert decision.ran == CPU_ONNX_RUNTIME


def test_s4_missing_adapter_is_unit_absent() -> None:
    """§4 (our decision): a path with no adapter has no backend: dispatch_unit_absent."""
    offer = REFERENCE_OFFER
    adapters = {CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME)}
    report = choose(BMSHJ2018, Tier.NONE, offer, adapters).report
    assert [(r.path, r.reason) for r in report.refused] == [(NPU_MODEL_RUNTIME, Code.UNIT_ABSENT)]
    assert report.ran is not None and report.ran.path == CPU_ONNX_RUNTIME


def test_s4_backend_failed_keeps_cause_and_tries_next() -> None:
    """§4.3: a backend error refuses the path (dispatch_backend_failed); the next is tried and
    the exception is kept in Decision.failures."""
    offer = (NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME)
    adapters = scripted(offer, npu_model_runtime_float={"fails": True})
    decision = choose(BMSHJ2018, Tier.NONE, offer, adapters)
    assert decision.report.refused[0].reason is Code.BACKEND_FAILED
    assert isinstance(decision.failures[NPU_MODEL_RUNTIME], BackendFailed)
    assert decision.ran == CPU_ONNX_RUNTIME


class _BadPlan(ScriptedAdapter):
    """An adapter whose plan() answers something other than a Placement or None."""

    def __init__(self, path: DispatchPath, answer: Any) -> None:
        super().__init__(path)
        self.answer = answer

    def plan(self, job: Any) -> Any:
        return self.answer


@pytest.mark.parametrize("answer", [{"npu": 3}, 7, "cpu", object()], ids=type)
def test_s4_a_plan_that_is_not_a_placement_is_backend_failed(answer: Any) -> None:
    """§4.3: a plan that is not a placement refuses the path like any backend error; the
    next path runs (before: an AttributeError left choose())."""
    offer = (NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME)
    adapters: dict[DispatchPath, Any] = {
        **scripted(offer),
        NPU_MODEL_RUNTIME: _BadPlan(NPU_MODEL_RUNTIME, answer),
    }
    decision = choose(BMSHJ2018, Tier.NONE, offer, adapters)
    assert decision.report.refused[0].reason is Code.BACKEND_FAILED
    assert "not a placement" in str(decision.failures[NPU_MODEL_RUNTIME])
    assert decision.ran == CPU_ONNX_RUNTIME


class _Raising(ScriptedAdapter):
    """Raises a foreign exception from one chosen question."""

    def __init__(self, path: DispatchPath, at: str, exc: Exception) -> None:
        super().__init__(path)
        self.at, self.exc = at, exc

    def _maybe(self, name: str) -> None:
        if name == self.at:
            raise self.exc

    def unit_present(self) -> bool:
        self._maybe("unit_present")
        return super().unit_present()

    def program_present(self, job: Any) -> bool:
        self._maybe("program_present")
        return super().program_present(job)

    def takes_shape(self, job: Any) -> bool:
        self._maybe("takes_shape")
        return super().takes_shape(job)

    def plan(self, job: Any) -> Placement | None:
        self._maybe("plan")
        return super().plan(job)

    def run(self, job: Any) -> Any:
        self._maybe("run")
        return super().run(job)


@pytest.mark.parametrize("at", ["unit_present", "program_present", "takes_shape", "plan", "run"])
@pytest.mark.parametrize(
    "exc", [RuntimeError("boom"), OSError("gone"), KeyError("k"), ValueError("v")], ids=repr
)
def test_s4_any_exception_is_backend_failed(at: str, exc: Exception) -> None:
    """§4.3 (our decision): any exception from an adapter, while answering or running, is
    dispatch_backend_failed; the cause is kept and the next path is tried."""
    offer = (NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME)
    adapters: dict[DispatchPath, Adapter] = {
        NPU_MODEL_RUNTIME: _Raising(NPU_MODEL_RUNTIME, at, exc),
        CPU_ONNX_RUNTIME: ScriptedAdapter(CPU_ONNX_RUNTIME),
    }
    decision = choose(BMSHJ2018, Tier.NONE, offer, adapters)
    assert [(r.path, r.reason) for r in decision.report.refused] == [
        (NPU_MODEL_RUNTIME, Code.BACKEND_FAILED)
    ]
    assert decision.failures[NPU_MODEL_RUNTIME] is exc
    assert decision.ran == CPU_ONNX_RUNTIME


def test_s4_keyboard_interrupt_is_not_swallowed() -> None:
    """§4.3: only exceptions are backend failures; a KeyboardInterrupt propagates."""
    offer = (CPU_ONNX_RUNTIME,)
    adapters: dict[DispatchPath, Adapter] = {
        CPU_ONNX_RUNTIME: _Raising(CPU_ONNX_RUNTIME, "run", KeyboardInterrupt())  # type: ignore[arg-type]
    }
    with pytest.raises(KeyboardInterrupt):
        choose(BMSHJ2018, Tier.NONE, offer, adapters)


def test_s4_all_refused_ran_null() -> None:
    """§4: when every offered path is refused the decode fails with the report: ran is null,
    every path is in refused in offer order, and the output is None."""
    offer = REFERENCE_OFFER
    decision = choose(BMSHJ2018, Tier.DECODE_EQUIVALENCE, offer, scripted(offer))
    assert decision.report.ran is None
    assert decision.ran is None
    assert decision.output is None
    assert [(r.path, r.reason) for r in decision.report.refused] == [
        (NPU_MODEL_RUNTIME, Code.TIER_REFUSED),
        (CPU_ONNX_RUNTIME, Code.TIER_REFUSED),
        (CPU_WAI_OPS, Code.ARITHMETIC_MISMATCH),
    ]


def test_s4_job_is_passed_through_to_adapter() -> None:
    """§4: the core never looks inside the job; the adapter gets it as given."""
    seen: list[Any] = []

    class Recording(ScriptedAdapter):
        def run(self, job: Any) -> Any:
            seen.append(job)
            return job

    job = object()
    decision = choose(
        BMSHJ2018,
        Tier.NONE,
        (CPU_ONNX_RUNTIME,),
        {CPU_ONNX_RUNTIME: Recording(CPU_ONNX_RUNTIME)},
        job,
    )
    assert seen == [job] and decision.output is job


def test_s4_offer_may_not_repeat_a_path() -> None:
    """§4/§5 (our decision): an offer names each path once; a repeat is InvalidOffer."""
    with pytest.raises(InvalidOffer, match="twice"):
        parse_offer(["cpu/onnx-runtime/float", "cpu/onnx-runtime/float"])
    offer = (CPU_ONNX_RUNTIME, CPU_ONNX_RUNTIME)
    with pytest.raises(InvalidOffer, match="twice"):
        choose(BMSHJ2018, Tier.NONE, offer, scripted(offer))


@pytest.mark.parametrize(
    "bad", [[], ["cpu/onnx-runtime"], ["cpu/onnx/float"], ["tpu/wgsl/integer"]]
)
def test_s4_malformed_offer_is_refused(bad: list[str]) -> None:
    """§4: an offer is one or more unit/backend/arithmetic paths with §1's tokens."""
    with pytest.raises(ValueError):
        parse_offer(bad)


def test_s4_parse_offer_reads_strings_objects_and_paths() -> None:
    """§1/§4: an offer can be written as strings, JSON objects or DispatchPath values."""
    offer = parse_offer(
        [
            "npu/model-runtime/float",
            {"unit": "cpu", "backend": "onnx-runtime", "arithmetic": "float"},
            CPU_WAI_OPS,
        ]
    )
    assert offer == REFERENCE_OFFER
    assert [str(p) for p in offer] == [
        "npu/model-runtime/float",
        "cpu/onnx-runtime/float",
        "cpu/wai-ops/integer",
    ]


def test_s4_scripted_adapter_satisfies_protocol() -> None:
    """§4: ScriptedAdapter is an Adapter (runtime-checkable protocol)."""
    assert isinstance(ScriptedAdapter(GPU_WGSL), Adapter)


# §5 interplay with §4: the plan ----------------------------------------------------------------


def test_s5_plan_with_nothing_on_unit_not_placed_next_path_tried() -> None:
    """§5: a plan that puts no operation on the path's unit is not a run there: the path is
    refused (dispatch_not_placed) and the next is tried."""
    offer = (NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME)
    adapters = scripted(offer, npu_model_runtime_float={"placement": Placement(cpu=16, unknown=5)})
    decision = choose(BMSHJ2018, Tier.NONE, offer, adapters)
    assert decision.report.refused[0].reason is Code.NOT_PLACED
    assert "run" not in adapters[NPU_MODEL_RUNTIME].calls
    assert decision.ran == CPU_ONNX_RUNTIME


def test_s5_empty_plan_is_not_placed() -> None:
    """§5: a plan placing no operation at all places none on the unit either."""
    offer = (NPU_MODEL_RUNTIME,)
    adapters = scripted(offer, npu_model_runtime_float={"placement": Placement()})
    report = choose(BMSHJ2018, Tier.NONE, offer, adapters).report
    assert report.ran is None and report.refused[0].reason is Code.NOT_PLACED


def test_s5_plan_with_some_ops_elsewhere_reported_as_is() -> None:
    """§5: a plan that puts some operations elsewhere is reported as it is."""
    plan = Placement(npu=18, gpu=0, cpu=2, unknown=1)
    offer = (NPU_MODEL_RUNTIME,)
    report = choose(
        BMSHJ2018, Tier.NONE, offer, scripted(offer, npu_model_runtime_float={"placement": plan})
    ).report
    assert report.ran is not None and report.ran.placement == plan
    assert report.to_json()["ran"]["placement"] == {"npu": 18, "gpu": 0, "cpu": 2, "unknown": 1}


def test_s5_no_plan_placement_null() -> None:
    """§5: where the backend states no plan (WebNN), placement is null and the path runs."""
    offer = (NPU_WEBNN,)
    report = choose(BMSHJ2018, Tier.NONE, offer, scripted(offer)).report
    assert report.ran is not None and report.ran.placement is None
    assert report.to_json()["ran"]["placement"] is None


# §7 — codes ------------------------------------------------------------------------------------

MEANINGS = {
    "dispatch_tier_refused": (
        "the decode needs decode-equivalence and the path computes in floating point",
        "§3",
    ),
    "dispatch_arithmetic_mismatch": (
        "an integer path offered for a capability whose networks are not integer",
        "§3",
    ),
    "dispatch_unit_absent": ("the device has no such unit, or the backend is absent", "§4"),
    "dispatch_program_absent": ("the parameter set holds no program for the backend", "§4"),
    "dispatch_shape_mismatch": ("the set's program does not take this payload's shape", "§4"),
    "dispatch_not_placed": ("the backend's plan places no operation on the path's unit", "§5"),
    "dispatch_backend_failed": ("the backend failed the decode", "§4"),
}


def test_s7_exactly_seven_codes() -> None:
    """§7: seven refusal codes, the spec's tokens."""
    assert {str(c) for c in Code} == set(MEANINGS)
    assert len(Code) == 7


@pytest.mark.parametrize("token", list(MEANINGS))
def test_s7_code_meaning_and_section(token: str) -> None:
    """§7: each code carries the spec's meaning and the section that raises it."""
    code = Code(token)
    assert (code.meaning, code.section) == MEANINGS[token]


# Registry --------------------------------------------------------------------------------------


def test_registry_lookup_and_unknown() -> None:
    """§2/§6: the registry holds bmshj2018 (Neural), int_synth (NeuralIntegerExact) and
    bmshj2018_hyperprior (NeuralEntropyExact); an unknown name is UnknownCapability, but
    ``get`` and ``in`` answer plainly."""
    assert REGISTRY["wai.neural.bmshj2018"] is BMSHJ2018
    assert REGISTRY["wai.neural.int_synth"] is INT_SYNTH
    hyper = REGISTRY["wai.neural.bmshj2018_hyperprior"]
    assert hyper.registered_tier is Tier.ENTROPY_CONSISTENCY and hyper.networks.value == "float"
    with pytest.raises(UnknownCapability, match=r"wai\.nope"):
        REGISTRY["wai.nope"]
    assert REGISTRY.get("wai.nope") is None
    assert "wai.nope" not in REGISTRY
    assert "wai.neural.bmshj2018" in REGISTRY
    extended = REGISTRY.with_capability(ENTROPY)
    assert extended[ENTROPY.name] is ENTROPY and len(extended) == 4
    with pytest.raises(ValueError, match="twice"):
        extended.with_capability(ENTROPY)
