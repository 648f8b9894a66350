"""A set's ``facts`` (docs/sets.md, docs/bmshj2018-set.md) as a typed model, parsed once when
the manifest is read: the files the decode reads (``tables``, ``payload``, ``payload_info``),
what the set was written from (``quality``, ``weights_origin``, ``model``), the latent it states
and one entry per backend's program. Facts the model does not name are kept as they are (the
manifest's digest covers them), so a writer may record more than this build reads.
"""

from __future__ import annotations

import math
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

_MAX_DEPTH: Final = 32
Shape = list[StrictInt]


class ProgramFacts(BaseModel):
    """One backend's program in the set (``facts.programs.<key>``): its files and tensors."""

    model_config = ConfigDict(extra="allow", frozen=True)

    file: StrictStr | None = None
    weights: StrictStr | None = None
    input: StrictStr | None = None
    output: StrictStr | None = None
    latent_shape: Shape | None = None
    operations: StrictInt | None = None

    def shape(self) -> tuple[int, ...] | None:
        return None if not self.latent_shape else tuple(self.latent_shape)


class PayloadFacts(BaseModel):
    """``facts.payload`` written as an object rather than a file name (older writers)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    latent_shape: Shape | None = None


class SetFacts(BaseModel):
    """What a set states of itself. Every member is optional; a set states what it has."""

    model_config = ConfigDict(extra="allow", frozen=True)

    tables: StrictStr | None = None
    payload: StrictStr | PayloadFacts | None = None
    payload_info: StrictStr | None = None
    quality: StrictInt | None = None
    model: StrictStr | None = None
    weights_origin: StrictStr | None = None
    latent_channels: StrictInt | None = None
    latent_shape: Shape | None = None
    programs: dict[str, ProgramFacts] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _json_values(cls, value: Any) -> Any:
        check_json_value(value, 0)
        return value

    def program(self, key: str) -> ProgramFacts | None:
        """The program for backend ``key`` (``onnx-runtime``, ``model-runtime``, …)."""
        return self.programs.get(key)

    @property
    def payload_file(self) -> str | None:
        """The file holding the set's sample payload, when it names one."""
        return self.payload if isinstance(self.payload, str) else None

    @property
    def payload_info_file(self) -> str:
        return self.payload_info or "payload.json"

    def stated_shape(self) -> tuple[int, ...] | None:
        """A latent shape the set states: its own, its payload's, else a program's."""
        candidates = [self.latent_shape]
        if isinstance(self.payload, PayloadFacts):
            candidates.append(self.payload.latent_shape)
        candidates += [p.latent_shape for p in self.programs.values()]
        for shape in candidates:
            if shape:
                return tuple(shape)
        return None

    def to_json(self) -> dict[str, Any]:
        """Exactly the facts as written (nothing the writer left out is added)."""
        return self.model_dump(mode="json", exclude_unset=True)


def check_json_value(value: Any, depth: int) -> None:
    """Facts are JSON: finite numbers, text keys, nested at most 32 deep."""
    if depth > _MAX_DEPTH:
        raise ValueError("facts nested too deep")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("facts hold a non-finite number")
    if isinstance(value, list):
        for item in value:
            check_json_value(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("facts keys are text")
            check_json_value(item, depth + 1)
    elif not (value is None or isinstance(value, bool | int | float | str | BaseModel)):
        raise ValueError(f"facts hold a {type(value).__name__}, not a JSON value")
