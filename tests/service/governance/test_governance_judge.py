"""Judging run reports against the model policy: every kind of violation refused with its reason,
every reason listed by decode and by rule, a compliant run report accepted."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.dispatch.errors import InvalidReport
from wai_dispatch.dispatch.report import Report
from wai_dispatch.service.governance import (
    Rule,
    RunReportMalformed,
    judge,
    load_policy,
    loads_run_report,
    parse_run_report,
)
from wai_dispatch.service.governance.runreport import MAX_DECODES

ROOT = Path(__file__).resolve().parents[3]
POLICY = load_policy((ROOT / "docs" / "examples" / "policy.yaml").read_text())
EXAMPLE = json.loads((ROOT / "docs" / "examples" / "run-report.json").read_text())
A, B, C = "a" * 64, "b" * 64, "c" * 64


def _run(*decodes: Any, sink: str = "kiosk-01") -> Any:
    return parse_run_report(
        {"format": "wai-run-report/1", "id": "r1", "sink": sink, "decodes": list(decodes)}
    )


def _decode(**changes: Any) -> dict[str, Any]:
    """The example's first decode (npu/model-runtime/float, tier none, set A), changed."""
    decode = copy.deepcopy(EXAMPLE["decodes"][0])
    report = decode["report"]
    for key, value in changes.items():
        if key in ("set_digest", "symbols_digest"):
            decode[key] = value
        elif key.startswith("ran_"):
            report["ran"][key[4:]] = value
        else:
            report[key] = value
    return decode


def _reasons(verdict: Any) -> list[list[tuple[str, str]]]:
    return [[(str(r.rule), r.message) for r in d.reasons] for d in verdict.decodes]


def test_the_documented_run_report_is_accepted() -> None:
    verdict = judge(parse_run_report(EXAMPLE), POLICY, policy_version=3)
    assert verdict.accepted
    assert verdict.to_json() == {
        "format": "wai-run-verdict/1",
        "run_report": "kiosk-01-2026-11-30-0001",
        "sink": "kiosk-01",
        "class": "kiosk",
        "policy": {"version": 3, "sha256": POLICY.sha256},
        "accepted": True,
        "refused_decodes": 0,
        "decodes": [
            {
                "index": i,
                "accepted": True,
                "set_digest": A,
                "symbols_digest": "4" * 64,
                "reasons": [],
            }
            for i in (0, 1)
        ],
    }


def test_a_set_the_class_may_not_run() -> None:
    verdict = judge(_run(_decode(set_digest=C)), POLICY)
    assert not verdict.accepted
    assert _reasons(verdict) == [
        [("set_not_allowed", f"class 'kiosk' may not run set {'c' * 12}… for wai.neural.bmshj2018")]
    ]


def test_an_allowed_digest_under_another_capability_is_not_allowed() -> None:
    # int_synth needs decode-equivalence on an integer path; the report is valid, the set is
    # allowed for bmshj2018 only, and the kiosk class may not claim decode-equivalence.
    report = {
        "kind": "wai-neural-dispatch/1",
        "capability": "wai.neural.int_synth",
        "needed": "decode-equivalence",
        "ran": {
            "unit": "cpu",
            "backend": "wai-ops",
            "arithmetic": "integer",
            "tier": "decode-equivalence",
            "placement": None,
        },
        "refused": [],
    }
    verdict = judge(_run({"set_digest": A, "symbols_digest": None, "report": report}), POLICY)
    assert [[rule for rule, _ in d] for d in _reasons(verdict)] == [
        ["set_not_allowed", "tier_not_allowed"]
    ]


def test_a_tier_the_class_may_not_claim() -> None:
    # archive-01 may run set B at decode-equivalence only; a float decode at none is valid
    # dispatch but not what its class may claim.
    decode = _decode(set_digest=B)
    verdict = judge(_run(decode, sink="archive-01"), POLICY)
    assert _reasons(verdict) == [
        [
            (
                "tier_not_allowed",
                "class 'archive' may not claim none (it may claim decode-equivalence)",
            )
        ]
    ]


def test_a_float_path_claiming_decode_equivalence_is_refused_always() -> None:
    # Even a class that may claim decode-equivalence and run the set: §5 refuses the claim.
    decode = _decode(set_digest=B, ran_tier="decode-equivalence")
    verdict = judge(_run(decode, sink="archive-01"), POLICY)
    assert _reasons(verdict) == [
        [
            (
                "report_invalid",
                "float path npu/model-runtime/float claims decode-equivalence (§3, §5)",
            ),
            (
                "float_claims_decode_equivalence",
                "float path npu/model-runtime/float claims decode-equivalence",
            ),
        ]
    ]


RAN_NPU = {"unit": "npu", "backend": "model-runtime", "arithmetic": "float"}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        pytest.param(
            {"refused": [{**RAN_NPU, "reason": "dispatch_unit_absent"}]},
            "a path appears more than once",
            id="ran-also-refused",
        ),
        pytest.param(
            {"ran_placement": {"npu": 0, "gpu": 0, "cpu": 21, "unknown": 0}},
            "puts no operation on npu",
            id="placement-nothing-on-unit",
        ),
        pytest.param(
            {"capability": "wai.neural.int_synth"},
            "below wai.neural.int_synth's registered tier",
            id="needed-inconsistent-with-capability",
        ),
        pytest.param({"needed": "decode-equivalence"}, "ran a decode that needs", id="intent"),
        pytest.param({"kind": "wai-neural-dispatch/2"}, "kind is", id="does-not-parse"),
        pytest.param({"ran_unit": "tpu"}, "tpu", id="unknown-token"),
    ],
)
def test_a_report_that_contradicts_itself_is_refused_with_the_validators_reason(
    changes: dict[str, Any], why: str
) -> None:
    decode = _decode(**changes)
    with pytest.raises(InvalidReport) as info:  # the project's one validator says why
        Report.from_json(decode["report"])
    verdict = judge(_run(decode), POLICY)
    (reasons,) = _reasons(verdict)
    assert reasons[0] == ("report_invalid", info.value.message)
    assert why in info.value.message


def test_a_webnn_path_with_a_placement_is_refused() -> None:
    decode = _decode(ran_backend="webnn")  # the example's placement stays: WebNN states none
    with pytest.raises(InvalidReport, match="WebNN"):  # §5: WebNN states no placement
        Report.from_json(decode["report"])
    (reasons,) = _reasons(judge(_run(decode), POLICY))
    assert [rule for rule, _ in reasons] == ["report_invalid"]


def test_every_reason_is_listed_by_decode_and_by_rule() -> None:
    good = _decode()
    bad = _decode(set_digest=C, ran_tier="decode-equivalence")
    broken = {"set_digest": "nope", "symbols_digest": 7, "report": None, "extra": 1}
    verdict = judge(_run(good, bad, broken, "not an object"), POLICY)
    assert not verdict.accepted
    assert [d.accepted for d in verdict.decodes] == [True, False, False, False]
    assert [[rule for rule, _ in d] for d in _reasons(verdict)] == [
        [],
        [
            "report_invalid",
            "float_claims_decode_equivalence",
            "set_not_allowed",
            "tier_not_allowed",
        ],
        ["decode_invalid", "report_invalid"],
        ["decode_invalid"],
    ]
    assert _reasons(verdict)[2][0][1] == (
        "members are exactly report, set_digest, symbols_digest; set_digest is 64 lowercase "
        "hex digits; symbols_digest is 64 lowercase hex digits or null"
    )
    assert verdict.to_json()["refused_decodes"] == 3


def test_a_sink_in_no_class_may_run_nothing() -> None:
    verdict = judge(_run(_decode(), sink="stranger"), POLICY)
    assert verdict.sink_class is None
    assert _reasons(verdict) == [[("sink_unclassified", "sink 'stranger' is in no class")]]


def test_rules_carry_their_meaning_and_are_documented() -> None:
    doc = (ROOT / "docs" / "policy.md").read_text()
    for rule in Rule:
        assert f"| `{rule}` | {rule.meaning} |" in doc
        assert not rule.startswith("dispatch_")  # never counted among the §7 refusal codes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "a run report is a JSON object"),
        ('{"format": "wai-run-report/1", "id": "x", "sink": "s"}', "missing ['decodes']"),
        (
            '{"format": "wai-run-report/9", "id": "x", "sink": "s", "decodes": [{}]}',
            "format is 'wai-run-report/9'",
        ),
        (
            '{"format": "wai-run-report/1", "id": "a b", "sink": "s", "decodes": [{}]}',
            "id is 1 to 128 characters",
        ),
        (
            '{"format": "wai-run-report/1", "id": "x", "sink": "", "decodes": [{}]}',
            "sink is 1 to 128 characters",
        ),
        (
            '{"format": "wai-run-report/1", "id": "x", "sink": "s", "decodes": []}',
            "decodes is a non-empty list",
        ),
    ],
)
def test_a_run_report_whose_frame_does_not_read_is_an_error(text: str, message: str) -> None:
    with pytest.raises(RunReportMalformed, match=re.escape(message)) as info:
        loads_run_report(text)
    assert info.value.code == "run_report_malformed"


def test_decodes_are_bounded() -> None:
    with pytest.raises(RunReportMalformed, match="over the 10000 allowed"):
        _run(*([{}] * (MAX_DECODES + 1)))


def test_governance_imports_without_the_web_stack() -> None:
    """The CLI judges offline: governance needs no FastAPI, SQLAlchemy or uvicorn."""
    import subprocess
    import sys

    script = (
        "import sys, wai_dispatch.service.governance, wai_dispatch.cli.policy\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'starlette', 'sqlalchemy', 'uvicorn', 'onnxruntime', 'numpy')))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_seeded_reports_are_valid_reports() -> None:
    """tools/seed_reports.py draws only reports the project's validator accepts."""
    import random

    from wai_dispatch.tools.seed_reports import _report

    rng = random.Random(7)
    drawn = [_report(rng) for _ in range(400)]
    for report in drawn:
        Report.from_json(report)
    assert {r["ran"]["backend"] if r["ran"] else None for r in drawn} == {
        "model-runtime",
        "onnx-runtime",
        "wai-ops",
        "wgsl",
        None,
    }


@pytest.mark.parametrize(
    ("unit", "backend"),
    [("cpu", "model-runtime"), ("gpu", "onnx-runtime"), ("npu", "model-runtime")],
)
def test_a_float_backend_claiming_decode_equivalence_is_refused_whatever_it_states(
    unit: str, backend: str
) -> None:
    """Issue 29: a decode that claims ``integer`` on a backend that computes in float (the table
    of docs/dispatch.md) is refused as a float path's claim, and as a path that cannot exist."""
    decode = _decode(
        set_digest=B,
        capability="wai.neural.int_synth",
        needed="decode-equivalence",
        ran_unit=unit,
        ran_backend=backend,
        ran_arithmetic="integer",
        ran_tier="decode-equivalence",
        ran_placement=None,
    )
    verdict = judge(_run(decode, sink="archive-01"), POLICY)
    (reasons,) = _reasons(verdict)
    rules = [rule for rule, _ in reasons]
    assert "report_invalid" in rules and "float_claims_decode_equivalence" in rules
    assert dict(reasons)["float_claims_decode_equivalence"] == (
        f"float path {unit}/{backend}/integer (its backend computes in float) claims "
        "decode-equivalence"
    )
    assert not verdict.accepted
