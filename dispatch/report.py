"""The report ``wai-neural-dispatch/1`` (§5): build, serialise, parse and validate.

:func:`Report.from_json` rejects a malformed or self-contradictory report with the reason
(:class:`~dispatch.errors.InvalidReport`); governance and the dashboard read reports through it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import strictjson
from .errors import InvalidReport, WaiError
from .offer import DispatchPath, impossible
from .registry import REGISTRY, Registry
from .tokens import Arithmetic, Backend, Code, Tier, Unit, parse

KIND = "wai-neural-dispatch/1"
_PLACEMENT_KEYS = ("npu", "gpu", "cpu", "unknown")
#: The most a placement count may be: what a 32-bit integer column holds (the report store's).
MAX_COUNT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Placement:
    """How many of the program's operations the backend's plan puts on each unit, constants
    left out (§5). ``unknown`` counts operations the plan names no unit for."""

    npu: int = 0
    gpu: int = 0
    cpu: int = 0
    unknown: int = 0

    def __post_init__(self) -> None:
        for key in _PLACEMENT_KEYS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidReport(f"placement.{key} must be a count >= 0, not {value!r:.40}")
            if value > MAX_COUNT:
                raise InvalidReport(f"placement.{key} is over {MAX_COUNT}: no program is that big")

    def on(self, unit: Unit) -> int:
        count: int = getattr(self, str(unit))
        return count

    @property
    def total(self) -> int:
        return self.npu + self.gpu + self.cpu + self.unknown

    def to_json(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in _PLACEMENT_KEYS}

    @classmethod
    def from_json(cls, obj: object) -> Placement:
        if not isinstance(obj, Mapping) or set(obj) != set(_PLACEMENT_KEYS):
            raise InvalidReport("placement has exactly the members npu, gpu, cpu, unknown")
        return cls(**{key: obj[key] for key in _PLACEMENT_KEYS})


@dataclass(frozen=True, slots=True)
class Ran:
    """The path that ran, the tier the decode holds (§3) and the backend's placement (§5)."""

    path: DispatchPath
    tier: Tier
    placement: Placement | None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.path.to_json(),
            "tier": str(self.tier),
            "placement": None if self.placement is None else self.placement.to_json(),
        }


@dataclass(frozen=True, slots=True)
class Refusal:
    path: DispatchPath
    reason: Code

    def to_json(self) -> dict[str, str]:
        return {**self.path.to_json(), "reason": str(self.reason)}


@dataclass(frozen=True, slots=True)
class Report:
    capability: str
    needed: Tier
    ran: Ran | None
    refused: tuple[Refusal, ...]

    kind = KIND

    def to_json(self) -> dict[str, Any]:
        """Exactly §5's members, in §5's order."""
        return {
            "kind": KIND,
            "capability": self.capability,
            "needed": str(self.needed),
            "ran": None if self.ran is None else self.ran.to_json(),
            "refused": [r.to_json() for r in self.refused],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: object, *, registry: Registry = REGISTRY) -> Report:
        """Parse and validate a report; :class:`InvalidReport` names what is wrong."""
        try:
            report = _parse(obj)
        except InvalidReport:
            raise
        except WaiError as exc:
            raise InvalidReport(f"report: {exc.message}") from exc
        report.validate(registry=registry)
        return report

    @classmethod
    def loads(cls, text: str | bytes, *, registry: Registry = REGISTRY) -> Report:
        try:
            obj = strictjson.loads(text)
        except InvalidReport:
            raise
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise InvalidReport(f"report is not JSON: {' '.join(str(exc).split())}") from None
        return cls.from_json(obj, registry=registry)

    def validate(self, *, registry: Registry = REGISTRY) -> None:
        """Raise :class:`InvalidReport` where the report contradicts the rules of §2–§5."""
        offered = [r.path for r in self.refused] + ([self.ran.path] if self.ran else [])
        if len(set(offered)) != len(offered):
            raise InvalidReport("a path appears more than once in the report")
        for path in offered:
            if path.unit is Unit.NPU and path.arithmetic is Arithmetic.INTEGER:
                raise InvalidReport(f"{path}: no integer path names npu in this revision (§3)")
            if (why := impossible(path)) is not None:
                raise InvalidReport(f"a path that cannot exist: {why}")
        cap = registry.get(self.capability)
        if cap is not None and self.needed < cap.registered_tier:
            raise InvalidReport(
                f"needed {self.needed} is below {self.capability}'s registered tier "
                f"{cap.registered_tier} (§2)"
            )
        for refusal in self.refused:
            _check_refusal(refusal, self.needed, cap.networks if cap else None)
        if self.ran is not None:
            _check_ran(self.ran, self.needed, cap.registered_tier if cap else None)
            if self.ran.path.arithmetic is Arithmetic.INTEGER and any(
                r.reason is Code.ARITHMETIC_MISMATCH for r in self.refused
            ):
                raise InvalidReport(
                    f"integer path {self.ran.path} ran, so the capability's networks are "
                    "integer, yet a path is refused with dispatch_arithmetic_mismatch (§3)"
                )


def _check_refusal(refusal: Refusal, needed: Tier, networks: Arithmetic | None) -> None:
    path, reason = refusal.path, refusal.reason
    if reason is Code.TIER_REFUSED and not (
        path.arithmetic is Arithmetic.FLOAT and needed is Tier.DECODE_EQUIVALENCE
    ):
        raise InvalidReport(
            f"{path} refused with {reason}, but only a float path is refused for "
            f"decode-equivalence (§3)"
        )
    if reason is Code.ARITHMETIC_MISMATCH and (
        path.arithmetic is not Arithmetic.INTEGER or networks is Arithmetic.INTEGER
    ):
        raise InvalidReport(
            f"{path} refused with {reason}, but that code is for an integer path offered "
            f"for a capability whose networks are not integer (§3)"
        )
    # §3 is asked first: a path §3 refuses must carry §3's code, not a device answer.
    if reason not in (Code.TIER_REFUSED, Code.ARITHMETIC_MISMATCH):
        if path.arithmetic is Arithmetic.FLOAT and needed is Tier.DECODE_EQUIVALENCE:
            raise InvalidReport(
                f"{path} is float and the decode needs {needed}: "
                f"§3 refuses it with dispatch_tier_refused, not {reason}"
            )
        if path.arithmetic is Arithmetic.INTEGER and networks is Arithmetic.FLOAT:
            raise InvalidReport(
                f"{path} is integer and the capability's networks are float: "
                f"§3 refuses it with dispatch_arithmetic_mismatch, not {reason}"
            )


def _check_ran(ran: Ran, needed: Tier, registered: Tier | None) -> None:
    path = ran.path
    if path.arithmetic is Arithmetic.FLOAT:
        if needed is Tier.DECODE_EQUIVALENCE:
            raise InvalidReport(f"float path {path} ran a decode that needs {needed} (§3)")
        if ran.tier is Tier.DECODE_EQUIVALENCE:
            raise InvalidReport(f"float path {path} claims {ran.tier} (§3, §5)")
        if registered is not None and ran.tier > registered:
            raise InvalidReport(
                f"float path {path} claims {ran.tier}, above the registered tier {registered} (§3)"
            )
        # §3: a float path holds the registered tier and runs only a decode needing it.
        if ran.tier > needed:
            raise InvalidReport(
                f"float path {path} claims {ran.tier}, but a float path holds the tier the "
                f"decode needs ({needed}) (§3)"
            )
    else:
        if registered is not None and registered is not Tier.DECODE_EQUIVALENCE:
            raise InvalidReport(
                f"integer path {path} ran a capability whose networks are not integer (§3)"
            )
        if ran.tier is not Tier.DECODE_EQUIVALENCE and ran.tier >= needed:
            raise InvalidReport(
                f"integer path {path} claims {ran.tier}: an integer path runs only a "
                "decode-equivalence capability and holds decode-equivalence (§3)"
            )
    if path.backend is Backend.WEBNN and ran.placement is not None:
        raise InvalidReport(
            f"{path} ran with a placement, but WebNN states no placement: it is null (§5)"
        )
    if ran.tier < needed:
        raise InvalidReport(f"the decode needs {needed} but {path} holds only {ran.tier}")
    if ran.placement is not None and ran.placement.on(path.unit) == 0:
        raise InvalidReport(
            f"{path} ran with a plan that puts no operation on {path.unit}: that path is "
            "refused with dispatch_not_placed (§5)"
        )


_MEMBERS = ("kind", "capability", "needed", "ran", "refused")


def _parse(obj: object) -> Report:
    if not isinstance(obj, Mapping):
        raise InvalidReport("a report is a JSON object")
    if set(obj) != set(_MEMBERS):
        missing = sorted(set(_MEMBERS) - set(obj))
        extra = sorted(set(obj) - set(_MEMBERS))
        raise InvalidReport(
            f"report members are exactly {', '.join(_MEMBERS)} "
            f"(missing {missing}, unexpected {extra}) (§5)"
        )
    if obj["kind"] != KIND:
        raise InvalidReport(f"kind is {obj['kind']!r}, not {KIND!r}")
    capability = obj["capability"]
    if not isinstance(capability, str) or not capability:
        raise InvalidReport("capability is a non-empty string")
    needed = parse(Tier, obj["needed"], where="needed")
    ran_obj = obj["ran"]
    ran: Ran | None = None
    if ran_obj is not None:
        if not isinstance(ran_obj, Mapping):
            raise InvalidReport("ran is a path object or null")
        _exact_members(ran_obj, {"unit", "backend", "arithmetic", "tier", "placement"}, "ran")
        placement_obj = ran_obj["placement"]
        ran = Ran(
            DispatchPath.from_json(ran_obj, where="ran"),
            parse(Tier, ran_obj["tier"], where="ran.tier"),
            None if placement_obj is None else Placement.from_json(placement_obj),
        )
    refused_obj = obj["refused"]
    if not isinstance(refused_obj, list):
        raise InvalidReport("refused is a list")
    refused: list[Refusal] = []
    for i, item in enumerate(refused_obj):
        where = f"refused[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidReport(f"{where} is a path object with a reason")
        _exact_members(item, {"unit", "backend", "arithmetic", "reason"}, where)
        refused.append(
            Refusal(
                DispatchPath.from_json(item, where=where),
                parse(Code, item["reason"], where=f"{where}.reason"),
            )
        )
    return Report(capability, needed, ran, tuple(refused))


def _exact_members(obj: Mapping[str, object], members: set[str], where: str) -> None:
    if set(obj) != members:
        raise InvalidReport(f"{where} has exactly the members {', '.join(sorted(members))}")
