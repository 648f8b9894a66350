"""Property tests of §2–§5 over random offers, capabilities, intents, pins and adapter answers,
against an oracle written here from the spec's text (derandomized under the ``ci`` profile)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wai_dispatch.dispatch import (
    Adapter,
    Arithmetic,
    Backend,
    Capability,
    Code,
    DispatchPath,
    InvalidOffer,
    InvalidReport,
    Pin,
    Placement,
    Registry,
    RegistryClass,
    Report,
    ScriptedAdapter,
    Tier,
    Unit,
    choose,
    demand,
    parse_offer,
)
from wai_dispatch.dispatch.offer import impossible
from wai_dispatch.dispatch.registry import REGISTERED_TIER

ALL_PATHS = [DispatchPath(u, b, a) for u in Unit for b in Backend for a in Arithmetic]
#: §3: no integer path names npu in this revision, and §1's table of backends (docs/dispatch.md)
#: gives each backend its arithmetic and its units: no offer holds another path.
OFFERABLE = [p for p in ALL_PATHS if impossible(p) is None]
QUESTIONS = ("unit_present", "program_present", "takes_shape", "plan", "run")
TIER_TOKENS = [str(t) for t in Tier]


class Raising(ScriptedAdapter):
    """A scripted adapter that raises a foreign exception from one question."""

    def __init__(self, path: DispatchPath, raise_at: str, **answers: Any) -> None:
        super().__init__(path, **answers)
        self.raise_at = raise_at

    def _check(self, name: str) -> None:
        if name == self.raise_at:
            self.calls.append(name)
            raise RuntimeError(f"{name} exploded")

    def unit_present(self) -> bool:
        self._check("unit_present")
        return super().unit_present()

    def program_present(self, job: Any) -> bool:
        self._check("program_present")
        return super().program_present(job)

    def takes_shape(self, job: Any) -> bool:
        self._check("takes_shape")
        return super().takes_shape(job)

    def plan(self, job: Any) -> Placement | None:
        self._check("plan")
        return super().plan(job)

    def run(self, job: Any) -> Any:
        self._check("run")
        return super().run(job)


@dataclass(frozen=True)
class Answers:
    unit: bool
    program: bool
    shape: bool
    placement: Placement | None
    fails: bool
    raise_at: str | None

    def adapter(self, path: DispatchPath) -> Adapter:
        kwargs: dict[str, Any] = {
            "unit": self.unit,
            "program": self.program,
            "shape": self.shape,
            "placement": self.placement,
            "fails": self.fails,
            "output": f"output of {path}",
        }
        if self.raise_at is None:
            return ScriptedAdapter(path, **kwargs)
        return Raising(path, self.raise_at, **kwargs)


# Zero is drawn often: a plan with nothing on the path's unit is §5's not_placed.
counts = st.one_of(st.sampled_from([0, 0, 1, 21]), st.integers(min_value=0, max_value=30))
placements = st.one_of(st.none(), st.builds(Placement, counts, counts, counts, counts))
mostly = st.sampled_from([True, True, True, False])  # yes three times in four
answers = st.builds(
    Answers,
    unit=mostly,
    program=mostly,
    shape=mostly,
    placement=placements,
    fails=mostly.map(lambda yes: not yes),
    raise_at=st.one_of(st.none(), st.none(), st.sampled_from(QUESTIONS)),
)


@st.composite
def capabilities(draw: st.DrawFn) -> Capability:
    cls = draw(st.sampled_from(list(RegistryClass)))
    networks = Arithmetic.INTEGER if cls is RegistryClass.NEURAL_INTEGER_EXACT else Arithmetic.FLOAT
    name = draw(st.sampled_from(["wai.neural.bmshj2018", "wai.neural.int_synth", "wai.neural.x"]))
    return Capability(name, cls, networks)


offers = st.lists(st.sampled_from(OFFERABLE), min_size=1, max_size=8, unique=True).map(tuple)
intents = st.one_of(st.none(), st.just("replicate"), st.text(max_size=12))


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[
    Capability, str | None, list[Pin], tuple[DispatchPath, ...], dict[DispatchPath, Answers]
]:
    cap = draw(capabilities())
    intent = draw(intents)
    pins = draw(
        st.lists(
            st.builds(
                Pin,
                capability=st.sampled_from([cap.name, "wai.neural.primary", "other"]),
                digest=st.text(max_size=8),
                tier=st.one_of(st.none(), st.sampled_from(TIER_TOKENS), st.text(max_size=20)),
            ),
            max_size=3,
        )
    )
    offer = draw(offers)
    script: dict[DispatchPath, Answers] = {}
    for path in offer:
        if draw(st.integers(0, 9)) > 0:  # one path in ten has no adapter
            script[path] = draw(answers)
            if path.backend is Backend.WEBNN:  # §5: WebNN states no placement
                script[path] = dataclasses.replace(script[path], placement=None)
    return cap, intent, pins, offer, script


# The oracle: the spec's rules, written again without dispatch's functions ---------------------


def oracle_needed(cap: Capability, intent: str | None, pins: list[Pin]) -> Tier:
    if cap.registry_class is RegistryClass.NEURAL_INTEGER_EXACT:
        return Tier.DECODE_EQUIVALENCE
    if intent == "replicate":
        return Tier.DECODE_EQUIVALENCE
    if any(p.capability == cap.name and p.tier == "decode-equivalence" for p in pins):
        return Tier.DECODE_EQUIVALENCE
    if cap.registry_class is RegistryClass.NEURAL_ENTROPY_EXACT:
        return Tier.ENTROPY_CONSISTENCY
    return Tier.NONE


def oracle_reason(
    path: DispatchPath, needed: Tier, cap: Capability, a: Answers | None
) -> str | None:
    """The code that refuses ``path``, or None when it runs."""
    if path.arithmetic is Arithmetic.FLOAT and needed is Tier.DECODE_EQUIVALENCE:
        return "dispatch_tier_refused"
    if (
        path.arithmetic is Arithmetic.INTEGER
        and cap.registry_class is not RegistryClass.NEURAL_INTEGER_EXACT
    ):
        return "dispatch_arithmetic_mismatch"
    if a is None:
        return "dispatch_unit_absent"
    placed = a.placement is None or getattr(a.placement, path.unit.value) > 0
    steps = [
        ("unit_present", a.unit, "dispatch_unit_absent"),
        ("program_present", a.program, "dispatch_program_absent"),
        ("takes_shape", a.shape, "dispatch_shape_mismatch"),
        ("plan", placed, "dispatch_not_placed"),
        ("run", not a.fails, "dispatch_backend_failed"),
    ]
    for name, ok, code in steps:
        if a.raise_at == name:
            return "dispatch_backend_failed"
        if not ok:
            return code
    return None


def oracle_report(
    cap: Capability,
    intent: str | None,
    pins: list[Pin],
    offer: tuple[DispatchPath, ...],
    script: dict[DispatchPath, Answers],
) -> dict[str, Any]:
    needed = oracle_needed(cap, intent, pins)
    refused: list[dict[str, Any]] = []
    ran: dict[str, Any] | None = None
    for path in offer:
        reason = oracle_reason(path, needed, cap, script.get(path))
        obj = {
            "unit": path.unit.value,
            "backend": path.backend.value,
            "arithmetic": path.arithmetic.value,
        }
        if reason is not None:
            refused.append({**obj, "reason": reason})
            continue
        tier = (
            REGISTERED_TIER[cap.registry_class]
            if path.arithmetic is Arithmetic.FLOAT
            else Tier.DECODE_EQUIVALENCE
        )
        placement = script[path].placement
        ran = {
            **obj,
            "tier": tier.value,
            "placement": None if placement is None else placement.to_json(),
        }
        break
    return {
        "kind": "wai-neural-dispatch/1",
        "capability": cap.name,
        "needed": needed.value,
        "ran": ran,
        "refused": refused,
    }


def run(
    cap: Capability,
    intent: str | None,
    pins: list[Pin],
    offer: tuple[DispatchPath, ...],
    script: dict[DispatchPath, Answers],
) -> tuple[Report, dict[DispatchPath, Adapter], Any]:
    adapters = {p: a.adapter(p) for p, a in script.items()}
    decision = choose(cap, demand(cap, intent=intent, pins=pins), offer, adapters)
    return decision.report, adapters, decision.output


# Properties ----------------------------------------------------------------------------------


@given(scenarios())
@pytest.mark.slow
def test_prop_report_is_the_oracles(scenario: Any) -> None:
    """§2–§5: the report is exactly what the spec's rules give, computed independently."""
    report, _, _ = run(*scenario)
    assert report.to_json() == oracle_report(*scenario)


@given(scenarios())
@pytest.mark.slow
def test_prop_no_float_path_runs_decode_equivalence(scenario: Any) -> None:
    """§3: no float path ever runs a decode that needs decode-equivalence."""
    report, adapters, _ = run(*scenario)
    if report.needed is Tier.DECODE_EQUIVALENCE:
        assert report.ran is None or report.ran.path.arithmetic is Arithmetic.INTEGER
        for path, adapter in adapters.items():
            if path.arithmetic is Arithmetic.FLOAT:
                assert isinstance(adapter, ScriptedAdapter) and adapter.calls == []


@given(scenarios())
@pytest.mark.slow
def test_prop_refused_keeps_offer_order(scenario: Any) -> None:
    """§5: refused paths then the ran path are a prefix of the offer, in order; when nothing
    ran, refused is the whole offer."""
    report, _, _ = run(*scenario)
    offer = scenario[3]
    seen = [r.path for r in report.refused] + ([report.ran.path] if report.ran else [])
    assert tuple(seen) == offer[: len(seen)]
    if report.ran is None:
        assert len(seen) == len(offer)


@given(scenarios())
def test_prop_ran_is_first_path_passing_every_check(scenario: Any) -> None:
    """§4: ran is the first path that passes every check; no later adapter is asked anything,
    and the output is that path's."""
    cap, intent, pins, offer, script = scenario
    report, adapters, output = run(*scenario)
    needed = oracle_needed(cap, intent, pins)
    passing = [p for p in offer if oracle_reason(p, needed, cap, script.get(p)) is None]
    expected = passing[0] if passing else None
    assert (report.ran.path if report.ran else None) == expected
    if expected is not None:
        assert output == f"output of {expected}"
        for later in offer[offer.index(expected) + 1 :]:
            adapter = adapters.get(later)
            assert adapter is None or (isinstance(adapter, ScriptedAdapter) and adapter.calls == [])
    else:
        assert output is None


@given(scenarios())
def test_prop_float_tier_never_above_registered(scenario: Any) -> None:
    """§3: a float path's tier is the registered tier, never above it."""
    report, _, _ = run(*scenario)
    cap = scenario[0]
    if report.ran is not None and report.ran.path.arithmetic is Arithmetic.FLOAT:
        assert report.ran.tier <= cap.registered_tier
        assert report.ran.tier is cap.registered_tier


@given(scenarios())
def test_prop_report_round_trips_and_validates(scenario: Any) -> None:
    """§5: every report choose gives validates and round-trips through JSON text."""
    cap = scenario[0]
    report, _, _ = run(*scenario)
    registry = Registry([cap])
    report.validate(registry=registry)
    assert Report.from_json(report.to_json(), registry=registry) == report
    assert Report.loads(json.dumps(report.to_json()), registry=registry) == report


@given(scenarios())
@pytest.mark.slow
def test_prop_needed_is_at_least_registered(scenario: Any) -> None:
    """§2: the tier a decode needs is never below the registered tier, and is one of two."""
    cap, intent, pins, _, _ = scenario
    needed = demand(cap, intent=intent, pins=pins)
    assert needed >= cap.registered_tier
    assert needed in (cap.registered_tier, Tier.DECODE_EQUIVALENCE)


@given(st.lists(st.sampled_from(ALL_PATHS), min_size=1, max_size=6))
def test_prop_parse_offer_refuses_repeats_and_impossible_paths(paths: list[DispatchPath]) -> None:
    """§1/§3/§4: an offer with a repeated path, an integer path naming npu or a path the table
    of backends refuses is InvalidOffer; every other non-empty list of paths is an offer, kept
    in order."""
    bad = len(set(paths)) != len(paths) or any(
        (p.unit is Unit.NPU and p.arithmetic is Arithmetic.INTEGER) or impossible(p) is not None
        for p in paths
    )
    if bad:
        with pytest.raises(InvalidOffer):
            parse_offer(paths)
    else:
        assert parse_offer([str(p) for p in paths]) == tuple(paths)
        assert parse_offer([p.to_json() for p in paths]) == tuple(paths)


@given(scenarios())
def test_prop_codes_are_from_section_7(scenario: Any) -> None:
    """§7: every refusal carries one of the seven codes."""
    report, _, _ = run(*scenario)
    assert all(isinstance(r.reason, Code) for r in report.refused)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 30)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(scenarios(), st.data())
def test_prop_mutated_reports_parse_or_are_invalid(scenario: Any, data: st.DataObject) -> None:
    """§5: a report with one member replaced by arbitrary JSON either parses to a report that
    round-trips, or is InvalidReport: never another exception."""
    report, _, _ = run(*scenario)
    obj = report.to_json()
    target = data.draw(st.sampled_from(["top", "ran", "refused"]))
    if target == "ran" and obj["ran"] is not None:
        obj["ran"][data.draw(st.sampled_from(sorted(obj["ran"])))] = data.draw(json_values)
    elif target == "refused" and obj["refused"]:
        item = data.draw(st.sampled_from(obj["refused"]))
        item[data.draw(st.sampled_from(sorted(item)))] = data.draw(json_values)
    else:
        obj[data.draw(st.sampled_from(sorted(obj)))] = data.draw(json_values)
    registry = Registry([scenario[0]])
    try:
        parsed = Report.from_json(obj, registry=registry)
    except InvalidReport as exc:
        assert exc.message
    else:
        assert Report.from_json(parsed.to_json(), registry=registry) == parsed


@given(json_values)
def test_prop_arbitrary_json_is_not_a_report(obj: Any) -> None:
    """§5: arbitrary JSON is rejected with InvalidReport and nothing else."""
    with pytest.raises(InvalidReport):
        Report.from_json(obj)
