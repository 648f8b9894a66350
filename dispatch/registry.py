"""Capabilities and their registration (§2, §3): a capability's registry class fixes its
registered tier, and whether its networks are integer decides which arithmetic may run it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .errors import UnknownCapability
from .tokens import Arithmetic, RegistryClass, Tier

#: The tier a registry class fixes (§2): decode-equivalence for ``NeuralIntegerExact``,
#: entropy-consistency for ``NeuralEntropyExact``, none for every other.
REGISTERED_TIER: Mapping[RegistryClass, Tier] = {
    RegistryClass.NEURAL_INTEGER_EXACT: Tier.DECODE_EQUIVALENCE,
    RegistryClass.NEURAL_ENTROPY_EXACT: Tier.ENTROPY_CONSISTENCY,
    RegistryClass.NEURAL: Tier.NONE,
}


@dataclass(frozen=True, slots=True)
class Capability:
    """A neural capability as registered: its name, registry class and network arithmetic."""

    name: str
    registry_class: RegistryClass
    networks: Arithmetic

    def __post_init__(self) -> None:
        # §3: only a capability registered at decode-equivalence has integer networks an
        # integer path may run; NeuralIntegerExact networks are integer by definition.
        integer_class = self.registry_class is RegistryClass.NEURAL_INTEGER_EXACT
        if integer_class != (self.networks is Arithmetic.INTEGER):
            raise ValueError(
                f"capability {self.name!r}: registry class {self.registry_class} "
                f"cannot have {self.networks} networks"
            )

    @property
    def registered_tier(self) -> Tier:
        return REGISTERED_TIER[self.registry_class]


class Registry(Mapping[str, Capability]):
    """An immutable name → capability table. Extend with :meth:`with_capability`."""

    def __init__(self, capabilities: Iterable[Capability] = ()) -> None:
        table: dict[str, Capability] = {}
        for cap in capabilities:
            if cap.name in table:
                raise ValueError(f"capability {cap.name!r} registered twice")
            table[cap.name] = cap
        self._table = table

    def __getitem__(self, name: str) -> Capability:
        try:
            return self._table[name]
        except KeyError:
            known = ", ".join(sorted(self._table))
            raise UnknownCapability(
                f"capability {name!r} is not registered; known: {known}"
            ) from None

    # Mapping's own get() and ``in`` catch only KeyError, and UnknownCapability is not one.
    def get(self, name: str, default: Capability | None = None) -> Capability | None:  # type: ignore[override]
        return self._table.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def with_capability(self, capability: Capability) -> Registry:
        return Registry([*self._table.values(), capability])


BMSHJ2018 = Capability("wai.neural.bmshj2018", RegistryClass.NEURAL, Arithmetic.FLOAT)
INT_SYNTH = Capability(
    "wai.neural.int_synth", RegistryClass.NEURAL_INTEGER_EXACT, Arithmetic.INTEGER
)

#: bmshj2018-hyperprior with an integer entropy stage (its hyper-synthesis a wai-ops/1 program)
#: and a float main synthesis: its symbols are the same on every machine (§3).
BMSHJ2018_HYPERPRIOR = Capability(
    "wai.neural.bmshj2018_hyperprior", RegistryClass.NEURAL_ENTROPY_EXACT, Arithmetic.FLOAT
)

REGISTRY = Registry([BMSHJ2018, INT_SYNTH, BMSHJ2018_HYPERPRIOR])
