"""§2–§4 as pure functions: :func:`demand` (the tier a decode needs), :func:`admit` (which
paths may run it) and :func:`choose` (the first offered path that runs, with the report)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .adapter import Adapter, BackendFailed
from .offer import DispatchPath, Offer, parse_offer
from .registry import Capability
from .report import Placement, Ran, Refusal, Report
from .tokens import Arithmetic, Code, Intent, Tier


@dataclass(frozen=True, slots=True)
class Pin:
    """An envelope's pin over one capability's parameter set (§2, SPEC §3.1).

    ``tier`` is the pin's tier token exactly as read (any string, or ``None``): §2 says a
    token the vocabulary does not register adds nothing, so it is never an error here.
    """

    capability: str
    digest: str
    tier: str | None = None


def demand(capability: Capability, *, intent: str | None = None, pins: Iterable[Pin] = ()) -> Tier:
    """The tier a decode of ``capability`` needs (§2).

    ``decode-equivalence`` when the capability is registered there (§2.1), the envelope's
    intent is ``replicate`` (§2.2), or the pin over *this* capability's set states
    ``tier: "decode-equivalence"`` (§2.3); otherwise the registered tier. A pin over another
    capability (the primary's, for a fallback decode) is not read.
    """
    if capability.registered_tier is Tier.DECODE_EQUIVALENCE:
        return Tier.DECODE_EQUIVALENCE
    if intent == Intent.REPLICATE:
        return Tier.DECODE_EQUIVALENCE
    for pin in pins:
        if pin.capability == capability.name and pin.tier == Tier.DECODE_EQUIVALENCE:
            return Tier.DECODE_EQUIVALENCE
    return capability.registered_tier


def admit(path: DispatchPath, needed: Tier, capability: Capability) -> Code | None:
    """§3: ``None`` when ``path`` may run the decode, else the refusal code."""
    if path.arithmetic is Arithmetic.FLOAT:
        if needed is Tier.DECODE_EQUIVALENCE:
            return Code.TIER_REFUSED
        return None
    if capability.networks is not Arithmetic.INTEGER:
        return Code.ARITHMETIC_MISMATCH
    return None


def held_tier(path: DispatchPath, capability: Capability) -> Tier:
    """§3: a float path holds the registered tier, never more; an integer path (which §3
    admits only for integer networks) holds ``decode-equivalence``."""
    if path.arithmetic is Arithmetic.FLOAT:
        return capability.registered_tier
    return Tier.DECODE_EQUIVALENCE


@dataclass(frozen=True, slots=True)
class Decision:
    """What :func:`choose` decided: the report, the output of the path that ran (``None``
    when none ran), and each backend failure's exception, by path, for logs."""

    report: Report
    output: Any = None
    failures: Mapping[DispatchPath, BaseException] = field(default_factory=dict)

    @property
    def ran(self) -> DispatchPath | None:
        return None if self.report.ran is None else self.report.ran.path


def choose(
    capability: Capability,
    needed: Tier,
    offer: Offer,
    adapters: Mapping[DispatchPath, Adapter],
    job: Any = None,
) -> Decision:
    """§4: try each offered path in order; the first that runs is the decode's.

    A path with no adapter is ``dispatch_unit_absent`` (the backend is absent). An adapter
    that raises while answering or running refuses its path with ``dispatch_backend_failed``
    (the backend failed; the exception is kept in :attr:`Decision.failures`). The offer is
    checked as :func:`~dispatch.offer.parse_offer` checks it (:class:`InvalidOffer`), so that
    every report ``choose`` gives validates.
    """
    offer = parse_offer(offer)
    refused: list[Refusal] = []
    failures: dict[DispatchPath, BaseException] = {}
    for path in offer:
        answer = ask_path(path, needed, capability, adapters.get(path), job)
        if answer.code is None:
            adapter = adapters[path]
            try:
                output = adapter.run(job)  # §4.3
            except Exception as exc:  # the boundary: any backend error refuses the path (§4.3)
                answer = Answer(Code.BACKEND_FAILED, error=exc)
        if answer.error is not None:
            failures[path] = answer.error
        if answer.code is not None:
            refused.append(Refusal(path, answer.code))
            continue
        ran = Ran(path, held_tier(path, capability), answer.placement)
        return Decision(Report(capability.name, needed, ran, tuple(refused)), output, failures)
    return Decision(Report(capability.name, needed, None, tuple(refused)), None, failures)


@dataclass(frozen=True, slots=True)
class Answer:
    """What :func:`ask_path` found for one path before running it: the refusal code (``None``:
    the path runs), the backend's placement (§5), and the exception of a backend that failed
    while answering (``code`` is then ``dispatch_backend_failed``)."""

    code: Code | None = None
    placement: Placement | None = None
    error: BaseException | None = None


def ask_path(
    path: DispatchPath,
    needed: Tier | None,
    capability: Capability | None,
    adapter: Adapter | None,
    job: Any = None,
) -> Answer:
    """§3, then §4.2's device questions in order, then the plan (§5): the one place they are
    asked, by :func:`choose` before it runs a path and by a plan shown without decoding.

    §3's refusal first (a path §3 refuses is not asked anything, §4.1); no adapter is
    ``dispatch_unit_absent``; then ``unit_present``, ``program_present``, ``takes_shape`` and
    ``plan``, the first 'no' being the refusal; a plan that puts nothing on the path's unit is
    ``dispatch_not_placed``. An adapter that raises refuses its path with
    ``dispatch_backend_failed``, the exception kept in :attr:`Answer.error`. Without a
    ``capability`` (one the registry does not hold, for a plan shown without decoding) §3 is
    not applied.
    """
    if capability is not None and needed is not None:
        code = admit(path, needed, capability)
        if code is not None:
            return Answer(code)
    if adapter is None:
        return Answer(Code.UNIT_ABSENT)
    try:
        if not adapter.unit_present():
            return Answer(Code.UNIT_ABSENT)
        if not adapter.program_present(job):
            return Answer(Code.PROGRAM_ABSENT)
        if not adapter.takes_shape(job):
            return Answer(Code.SHAPE_MISMATCH)
        placement = adapter.plan(job)
        if placement is not None and not isinstance(placement, Placement):
            raise BackendFailed(
                f"{path}: plan() gave a {type(placement).__name__}, not a placement or None"
            )
    except Exception as exc:  # the boundary: any backend error refuses the path (§4.3)
        return Answer(Code.BACKEND_FAILED, error=exc)
    if placement is not None and placement.on(path.unit) == 0:  # §5
        return Answer(Code.NOT_PLACED, placement)
    return Answer(None, placement)
