"""Paths and offers (§1, §4): a path is a unit, a backend and an arithmetic; an offer is the
ordered tuple of paths a sink tries. Offers are data: read one with :func:`parse_offer`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import InvalidOffer, UnknownToken
from .tokens import Arithmetic, Backend, Unit, parse


@dataclass(frozen=True, slots=True, order=True)
class DispatchPath:
    unit: Unit
    backend: Backend
    arithmetic: Arithmetic

    def __str__(self) -> str:
        return f"{self.unit}/{self.backend}/{self.arithmetic}"

    def to_json(self) -> dict[str, str]:
        return {
            "unit": str(self.unit),
            "backend": str(self.backend),
            "arithmetic": str(self.arithmetic),
        }

    @classmethod
    def from_json(cls, obj: object, *, where: str = "path") -> DispatchPath:
        if not isinstance(obj, Mapping):
            raise UnknownToken(f"{where}: a path is an object {{unit, backend, arithmetic}}")
        return cls(
            parse(Unit, obj.get("unit"), where=where),
            parse(Backend, obj.get("backend"), where=where),
            parse(Arithmetic, obj.get("arithmetic"), where=where),
        )

    @classmethod
    def parse(cls, text: str) -> DispatchPath:
        """Read ``unit/backend/arithmetic``, e.g. ``cpu/onnx-runtime/float``."""
        parts = text.split("/")
        if len(parts) != 3:
            raise InvalidOffer(f"path {text!r} is not unit/backend/arithmetic")
        return cls(
            parse(Unit, parts[0], where=text),
            parse(Backend, parts[1], where=text),
            parse(Arithmetic, parts[2], where=text),
        )


Offer = tuple[DispatchPath, ...]

#: §1 as this project reads it: the arithmetic each backend computes in. ONNX Runtime, a
#: platform's model runtime and WebNN choose their own precision, order and fusion (float);
#: the wai-ops/1 interpreter and its WGSL kernels compute in the registration's integers.
BACKEND_ARITHMETIC: Mapping[Backend, Arithmetic] = {
    Backend.MODEL_RUNTIME: Arithmetic.FLOAT,
    Backend.WEBNN: Arithmetic.FLOAT,
    Backend.ONNX_RUNTIME: Arithmetic.FLOAT,
    Backend.WAI_OPS: Arithmetic.INTEGER,
    Backend.WGSL: Arithmetic.INTEGER,
}
#: The units each backend drives (§1): the model runtime the neural processor, WebNN a context
#: for any unit, ONNX Runtime the CPU or a GPU, the interpreter the CPU, the kernels a GPU.
BACKEND_UNITS: Mapping[Backend, frozenset[Unit]] = {
    Backend.MODEL_RUNTIME: frozenset({Unit.NPU}),
    Backend.WEBNN: frozenset({Unit.NPU, Unit.GPU, Unit.CPU}),
    Backend.ONNX_RUNTIME: frozenset({Unit.CPU, Unit.GPU}),
    Backend.WAI_OPS: frozenset({Unit.CPU}),
    Backend.WGSL: frozenset({Unit.GPU}),
}


def impossible(path: DispatchPath) -> str | None:
    """Why ``path`` cannot exist under :data:`BACKEND_ARITHMETIC` and :data:`BACKEND_UNITS`
    (the table of docs/dispatch.md), or ``None`` for a path that can."""
    arithmetic = BACKEND_ARITHMETIC[path.backend]
    if path.arithmetic is not arithmetic:
        return f"{path}: {path.backend} computes in {arithmetic}, not {path.arithmetic} (§1)"
    units = BACKEND_UNITS[path.backend]
    if path.unit not in units:
        named = ", ".join(u for u in Unit if u in units)
        return f"{path}: {path.backend} drives {named}, not {path.unit} (§1)"
    return None


def parse_offer(items: Iterable[str | Mapping[str, object] | DispatchPath]) -> Offer:
    """An offer from strings, JSON objects or paths. Empty and repeated paths are refused:
    a report names each offered path once (§5). So is an integer path naming ``npu``: no
    integer path names the neural processor in this revision (§3); and a path the table of
    backends refuses (:func:`impossible`)."""
    paths: list[DispatchPath] = []
    for item in items:
        if isinstance(item, DispatchPath):
            path = item
        elif isinstance(item, str):
            path = DispatchPath.parse(item)
        else:
            path = DispatchPath.from_json(item, where="offer")
        if path in paths:
            raise InvalidOffer(f"path {path} is offered twice")
        if path.unit is Unit.NPU and path.arithmetic is Arithmetic.INTEGER:
            raise InvalidOffer(f"path {path}: no integer path names npu in this revision (§3)")
        if (why := impossible(path)) is not None:
            raise InvalidOffer(f"path {why}")
        paths.append(path)
    if not paths:
        raise InvalidOffer("an offer names at least one path")
    return tuple(paths)


NPU_MODEL_RUNTIME = DispatchPath(Unit.NPU, Backend.MODEL_RUNTIME, Arithmetic.FLOAT)
CPU_ONNX_RUNTIME = DispatchPath(Unit.CPU, Backend.ONNX_RUNTIME, Arithmetic.FLOAT)
GPU_ONNX_RUNTIME = DispatchPath(Unit.GPU, Backend.ONNX_RUNTIME, Arithmetic.FLOAT)
CPU_WAI_OPS = DispatchPath(Unit.CPU, Backend.WAI_OPS, Arithmetic.INTEGER)
GPU_WGSL = DispatchPath(Unit.GPU, Backend.WGSL, Arithmetic.INTEGER)
NPU_WEBNN = DispatchPath(Unit.NPU, Backend.WEBNN, Arithmetic.FLOAT)
GPU_WEBNN = DispatchPath(Unit.GPU, Backend.WEBNN, Arithmetic.FLOAT)
CPU_WEBNN = DispatchPath(Unit.CPU, Backend.WEBNN, Arithmetic.FLOAT)

#: The reference sink's offer (§4, §6.1): the neural processor through the model runtime,
#: then ONNX Runtime on the CPU, then the integer interpreter.
REFERENCE_OFFER: Offer = (NPU_MODEL_RUNTIME, CPU_ONNX_RUNTIME, CPU_WAI_OPS)
