"""Judging a run report against the model policy (§5, last paragraph): a pure function.

Each decode is held to the policy of the sink's class and refused with *every* reason that
applies, each naming its rule (:class:`Rule`). The dispatch report itself is checked by the
project's one validator (:meth:`dispatch.report.Report.from_json`), never by a copy of its rules.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wai_dispatch.dispatch.errors import InvalidReport
from wai_dispatch.dispatch.offer import BACKEND_ARITHMETIC
from wai_dispatch.dispatch.report import Report
from wai_dispatch.dispatch.tokens import Arithmetic, Tier
from wai_dispatch.service.governance.policy import Policy, SinkClass
from wai_dispatch.service.governance.runreport import RunReport

VERDICT_FORMAT = "wai-run-verdict/1"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_DECODE_MEMBERS = {"set_digest", "symbols_digest", "report"}
_TIERS = frozenset(t.value for t in Tier)
_BACKEND_ARITHMETIC = {str(b): a for b, a in BACKEND_ARITHMETIC.items()}


class Rule(enum.StrEnum):
    """Why a decode of a run report is refused; ``rule.meaning`` says it in one line."""

    meaning: str

    def __new__(cls, value: str, meaning: str) -> Rule:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    SINK_UNCLASSIFIED = "sink_unclassified", "the sink is in no class of the policy"
    DECODE_INVALID = (
        "decode_invalid",
        "the decode lacks a well-formed set_digest, symbols_digest or report member",
    )
    REPORT_INVALID = (
        "report_invalid",
        "the dispatch report does not parse or contradicts itself (dispatch.report's validator)",
    )
    FLOAT_CLAIMS_EQUIVALENCE = (
        "float_claims_decode_equivalence",
        "a float path claims decode-equivalence (§5: refused whatever the policy)",
    )
    SET_NOT_ALLOWED = (
        "set_not_allowed",
        "the sink's class may not run this parameter set for this capability",
    )
    TIER_NOT_ALLOWED = "tier_not_allowed", "the sink's class may not claim the tier that ran"


@dataclass(frozen=True, slots=True)
class Reason:
    rule: Rule
    message: str

    def to_json(self) -> dict[str, str]:
        return {"rule": str(self.rule), "message": self.message}


@dataclass(frozen=True, slots=True)
class DecodeVerdict:
    index: int
    set_digest: str | None
    symbols_digest: str | None
    reasons: tuple[Reason, ...]

    @property
    def accepted(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "accepted": self.accepted,
            "set_digest": self.set_digest,
            "symbols_digest": self.symbols_digest,
            "reasons": [r.to_json() for r in self.reasons],
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    run_report: str
    sink: str
    sink_class: str | None
    policy_sha256: str
    policy_version: int | None
    decodes: tuple[DecodeVerdict, ...]

    @property
    def accepted(self) -> bool:
        """A run report is accepted when every decode in it is."""
        return all(d.accepted for d in self.decodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": VERDICT_FORMAT,
            "run_report": self.run_report,
            "sink": self.sink,
            "class": self.sink_class,
            "policy": {"version": self.policy_version, "sha256": self.policy_sha256},
            "accepted": self.accepted,
            "refused_decodes": sum(not d.accepted for d in self.decodes),
            "decodes": [d.to_json() for d in self.decodes],
        }


def judge(run: RunReport, policy: Policy, *, policy_version: int | None = None) -> Verdict:
    """The verdict on ``run`` under ``policy``; never raises for what a decode holds."""
    cls = policy.class_of(run.sink)
    decodes = tuple(_judge_decode(i, obj, run.sink, cls) for i, obj in enumerate(run.decodes))
    return Verdict(
        run.id, run.sink, cls.name if cls else None, policy.sha256, policy_version, decodes
    )


def _judge_decode(index: int, obj: object, sink: str, cls: SinkClass | None) -> DecodeVerdict:
    reasons: list[Reason] = []
    if cls is None:
        reasons.append(Reason(Rule.SINK_UNCLASSIFIED, f"sink {sink!r} is in no class"))
    if not isinstance(obj, Mapping):
        reasons.append(Reason(Rule.DECODE_INVALID, "a decode is a JSON object"))
        return DecodeVerdict(index, None, None, tuple(reasons))
    set_digest = _digest(obj.get("set_digest"))
    symbols_digest = _digest(obj.get("symbols_digest"))
    reasons += _member_reasons(obj, set_digest, symbols_digest)
    raw = obj.get("report")
    try:
        Report.from_json(raw)
    except InvalidReport as exc:
        reasons.append(Reason(Rule.REPORT_INVALID, exc.message))
    # The rules below read the report's members where they are well typed, so a report that
    # fails the validator is still held to every rule it can be held to.
    reasons += _rule_reasons(raw if isinstance(raw, Mapping) else {}, cls, set_digest)
    return DecodeVerdict(index, set_digest, symbols_digest, tuple(reasons))


def _member_reasons(
    obj: Mapping[str, object], set_digest: str | None, symbols_digest: str | None
) -> list[Reason]:
    """A decode's members: exactly the three, its digests well formed."""
    problems = []
    if set(obj) != _DECODE_MEMBERS:
        problems.append("members are exactly report, set_digest, symbols_digest")
    if set_digest is None:
        problems.append("set_digest is 64 lowercase hex digits")
    if obj.get("symbols_digest") is not None and symbols_digest is None:
        problems.append("symbols_digest is 64 lowercase hex digits or null")
    return [Reason(Rule.DECODE_INVALID, "; ".join(problems))] if problems else []


def _rule_reasons(
    report: Mapping[str, Any], cls: SinkClass | None, set_digest: str | None
) -> list[Reason]:
    """The policy's rules over a decode's report: no float path claims decode-equivalence, and
    the sink's class allows the set and the tier."""
    reasons: list[Reason] = []
    capability = report.get("capability")
    ran = report.get("ran")
    ran = ran if isinstance(ran, Mapping) else {}
    tier, arithmetic = ran.get("tier"), ran.get("arithmetic")
    # a backend that computes in float (docs/dispatch.md's table) is a float path whatever
    # arithmetic the report states for it
    computes = _BACKEND_ARITHMETIC.get(str(ran.get("backend")))
    if tier == str(Tier.DECODE_EQUIVALENCE) and Arithmetic.FLOAT in (arithmetic, computes):
        path = "/".join(str(ran.get(k)) for k in ("unit", "backend", "arithmetic"))
        backend = "" if arithmetic == Arithmetic.FLOAT else " (its backend computes in float)"
        reasons.append(
            Reason(
                Rule.FLOAT_CLAIMS_EQUIVALENCE,
                f"float path {path}{backend} claims decode-equivalence",
            )
        )
    if cls is not None:
        if (
            set_digest is not None
            and isinstance(capability, str)
            and not cls.allows_set(capability, set_digest)
        ):
            reasons.append(
                Reason(
                    Rule.SET_NOT_ALLOWED,
                    f"class {cls.name!r} may not run set {set_digest[:12]}… for {capability}",
                )
            )
        if tier in _TIERS and Tier(tier) not in cls.tiers:
            allowed = ", ".join(sorted(str(t) for t in cls.tiers)) or "no tier"
            reasons.append(
                Reason(
                    Rule.TIER_NOT_ALLOWED,
                    f"class {cls.name!r} may not claim {tier} (it may claim {allowed})",
                )
            )
    return reasons


def _digest(value: object) -> str | None:
    return value if isinstance(value, str) and _DIGEST.fullmatch(value) else None
