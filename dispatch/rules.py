"""§2–§4 as pure functions: :func:`demand` (the tier a decode needs), :func:`admit` (which
paths may run it) and :func:`choose` (the first offered path that runs, with the report)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .adapter import Adapter
from .paths import Offer, Path, parse_offer
from .registry import Capability
from .report import Ran, Refusal, Report
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


def admit(path: Path, needed: Tier, capability: Capability) -> Code | None:
    """§3: ``None`` when ``path`` may run the decode, else the refusal code."""
    if path.arithmetic is Arithmetic.FLOAT:
        if needed is Tier.DECODE_EQUIVALENCE:
            return Code.TIER_REFUSED
        return None
    if capability.networks is not Arithmetic.INTEGER:
        return Code.ARITHMETIC_MISMATCH
    return None


def held_tier(path: Path, capability: Capability) -> Tier:
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
    failures: Mapping[Path, BaseException] = field(default_factory=dict)

    @property
    def ran(self) -> Path | None:
        return None if self.report.ran is None else self.report.ran.path


def choose(
    capability: Capability,
    needed: Tier,
    offer: Offer,
    adapters: Mapping[Path, Adapter],
    job: Any = None,
) -> Decision:
    """§4: try each offered path in order; the first that runs is the decode's.

    A path with no adapter is ``dispatch_unit_absent`` (the backend is absent). An adapter
    that raises while answering or running refuses its path with ``dispatch_backend_failed``
    (the backend failed; the exception is kept in :attr:`Decision.failures`). The offer is
    checked as :func:`~dispatch.paths.parse_offer` checks it (:class:`InvalidOffer`), so that
    every report ``choose`` gives validates.
    """
    offer = parse_offer(offer)
    refused: list[Refusal] = []
    failures: dict[Path, BaseException] = {}
    for path in offer:
        code = admit(path, needed, capability)  # §4.1: a path §3 refuses is not tried
        if code is not None:
            refused.append(Refusal(path, code))
            continue
        adapter = adapters.get(path)
        if adapter is None:
            refused.append(Refusal(path, Code.UNIT_ABSENT))
            continue
        try:
            code, placement = _ask(adapter, path, job)
            if code is None:
                output = adapter.run(job)  # §4.3
        except Exception as exc:  # the boundary: any backend error refuses the path (§4.3)
            failures[path] = exc
            refused.append(Refusal(path, Code.BACKEND_FAILED))
            continue
        if code is not None:
            refused.append(Refusal(path, code))
            continue
        ran = Ran(path, held_tier(path, capability), placement)
        return Decision(Report(capability.name, needed, ran, tuple(refused)), output, failures)
    return Decision(Report(capability.name, needed, None, tuple(refused)), None, failures)


def _ask(adapter: Adapter, path: Path, job: Any) -> tuple[Code | None, Any]:
    """§4.2's questions in order; the first 'no' is the refusal."""
    if not adapter.unit_present():
        return Code.UNIT_ABSENT, None
    if not adapter.program_present(job):
        return Code.PROGRAM_ABSENT, None
    if not adapter.takes_shape(job):
        return Code.SHAPE_MISMATCH, None
    placement = adapter.plan(job)
    if placement is not None and placement.on(path.unit) == 0:  # §5
        return Code.NOT_PLACED, None
    return None, placement
