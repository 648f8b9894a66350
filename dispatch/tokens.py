"""The spec's vocabulary (§1, §2, §7): units, backends, arithmetic, tiers, registry classes, codes.

Every token read from outside goes through :func:`parse`, which names the token and the tokens
it could have been; the one exception is a pin's tier (§2), read by :func:`dispatch.demand`.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from .errors import UnknownToken


class Unit(enum.StrEnum):
    """A unit of a sink's device that can run a capability's networks (§1)."""

    NPU = "npu"
    GPU = "gpu"
    CPU = "cpu"


class Backend(enum.StrEnum):
    """What drives a unit (§1)."""

    MODEL_RUNTIME = "model-runtime"
    WEBNN = "webnn"
    ONNX_RUNTIME = "onnx-runtime"
    WAI_OPS = "wai-ops"
    WGSL = "wgsl"


class Arithmetic(enum.StrEnum):
    """The arithmetic a path computes the networks in (§1)."""

    FLOAT = "float"
    INTEGER = "integer"


class Tier(enum.StrEnum):
    """Determinism tiers, ordered ``none < entropy-consistency < decode-equivalence`` (§2)."""

    NONE = "none"
    ENTROPY_CONSISTENCY = "entropy-consistency"
    DECODE_EQUIVALENCE = "decode-equivalence"

    @property
    def rank(self) -> int:
        return _TIER_ORDER.index(self)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Tier):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Tier):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Tier):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Tier):
            return NotImplemented
        return self.rank >= other.rank


_TIER_ORDER = (Tier.NONE, Tier.ENTROPY_CONSISTENCY, Tier.DECODE_EQUIVALENCE)


class RegistryClass(enum.StrEnum):
    """A capability's registry class; it fixes the capability's registered tier (§2,
    :data:`dispatch.registry.REGISTERED_TIER`).

    ``Neural`` is our name for every neural capability of neither exact class: the spec says
    only "every other" (decision recorded in docs/dispatch.md).
    """

    NEURAL_INTEGER_EXACT = "NeuralIntegerExact"
    NEURAL_ENTROPY_EXACT = "NeuralEntropyExact"
    NEURAL = "Neural"


class Intent(enum.StrEnum):
    """The envelope intent that changes a decode (§2). An envelope may carry other intents;
    they are kept as strings and change nothing here."""

    REPLICATE = "replicate"


class Code(enum.StrEnum):
    """The seven refusal codes (§7); ``code.meaning`` is the spec's phrase, ``code.section``
    the section that raises it."""

    TIER_REFUSED = "dispatch_tier_refused"
    ARITHMETIC_MISMATCH = "dispatch_arithmetic_mismatch"
    UNIT_ABSENT = "dispatch_unit_absent"
    PROGRAM_ABSENT = "dispatch_program_absent"
    SHAPE_MISMATCH = "dispatch_shape_mismatch"
    NOT_PLACED = "dispatch_not_placed"
    BACKEND_FAILED = "dispatch_backend_failed"

    @property
    def meaning(self) -> str:
        return _MEANINGS[self][0]

    @property
    def section(self) -> str:
        return _MEANINGS[self][1]


_MEANINGS: dict[Code, tuple[str, str]] = {
    Code.TIER_REFUSED: (
        "the decode needs decode-equivalence and the path computes in floating point",
        "§3",
    ),
    Code.ARITHMETIC_MISMATCH: (
        "an integer path offered for a capability whose networks are not integer",
        "§3",
    ),
    Code.UNIT_ABSENT: ("the device has no such unit, or the backend is absent", "§4"),
    Code.PROGRAM_ABSENT: ("the parameter set holds no program for the backend", "§4"),
    Code.SHAPE_MISMATCH: ("the set's program does not take this payload's shape", "§4"),
    Code.NOT_PLACED: ("the backend's plan places no operation on the path's unit", "§5"),
    Code.BACKEND_FAILED: ("the backend failed the decode", "§4"),
}

_E = TypeVar("_E", bound=enum.StrEnum)


def parse(kind: type[_E], value: object, *, where: str = "") -> _E:
    """Read a token of ``kind`` from outside; an unknown one is :class:`UnknownToken`."""
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    known = ", ".join(m.value for m in kind)
    at = f" in {where}" if where else ""
    raise UnknownToken(f"unknown {kind.__name__.lower()} token {value!r}{at}; known: {known}")
