"""A ``wai-ops/1`` program (docs/wai-ops.md): read the JSON graph and its SafeTensors weights,
validate every member, attribute, dtype, shape and value. :func:`parse_program` checks the
graph; :func:`paths.waiops.load.load_program`, the one entry, also reads the weights and proves
the bound rule (:mod:`paths.waiops.bounds`) before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wai_dispatch.paths.waiops.errors import (
    UnknownAttribute,
    UnknownOp,
    WaiOpsError,
    WeightsMismatch,
)

FORMAT = "wai-ops/1"
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

_CONV_WEIGHT = ("int8", "int16")
_I32 = ("int32",)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_in(lo: int, hi: int) -> Callable[[object], bool]:
    return lambda v: _is_int(v) and lo <= v <= hi  # type: ignore[operator]


def _pair(v: object) -> bool:
    return (
        isinstance(v, list)
        and len(v) == 2
        and all(_is_int(e) and INT32_MIN <= e <= INT32_MAX for e in v)
        and v[0] <= v[1]
    )


@dataclass(frozen=True)
class OpSpec:
    """What an op takes: how many inputs, its attributes (name → validator) and parameters
    (name → allowed dtypes)."""

    arity: int
    attrs: Mapping[str, Callable[[object], bool]]
    params: Mapping[str, tuple[str, ...]]


OPS: Mapping[str, OpSpec] = {
    "channel_affine": OpSpec(1, {}, {"scale": _I32, "offset": _I32}),
    "conv2d": OpSpec(
        1,
        {"kernel": _int_in(1, 7), "padding": _int_in(0, 6)},
        {"weight": _CONV_WEIGHT, "bias": _I32},
    ),
    "conv_transpose2d": OpSpec(
        1,
        {
            "kernel": _int_in(1, 7),
            "stride": _int_in(1, 2),
            "padding": _int_in(0, 6),
            "output_padding": _int_in(0, 1),
        },
        {"weight": _CONV_WEIGHT, "bias": _I32},
    ),
    "requantize": OpSpec(1, {"clamp": _pair}, {"multiplier": _I32, "shift": _I32}),
    "igdn": OpSpec(
        1,
        {"square_shift": _int_in(0, 30), "clamp": _pair},
        {"gamma": _I32, "beta": _I32, "shift": _I32},
    ),
    "add": OpSpec(2, {}, {}),
    "mul": OpSpec(2, {}, {}),
}


@dataclass(frozen=True)
class Operation:
    """One validated operation; ``params`` hold the weights as int64 arrays."""

    op: str
    name: str
    inputs: tuple[str, ...]
    output: str
    attrs: Mapping[str, Any]
    params: Mapping[str, np.ndarray]
    channels: int  # output channels


@dataclass(frozen=True)
class Program:
    """A validated ``wai-ops/1`` program whose bound rule holds. ``bounds`` maps every value to
    its proven per-channel interval (``lo``, ``hi``: int64 arrays); ``accumulators`` maps each
    convolution's name to its largest |partial sum|."""

    input_name: str
    input_channels: int
    input_range: tuple[int, int]
    output_name: str
    output_channels: int
    operations: tuple[Operation, ...]
    bounds: Mapping[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    accumulators: Mapping[str, int] = field(default_factory=dict)
    largest: int = 0  # the largest |value|, |intermediate| or |partial sum| the rule proved
    roots_products: Mapping[str, int] = field(default_factory=dict)  # igdn → its largest |x·r|

    @property
    def float32_exact(self) -> bool:
        """Every value, intermediate and partial sum is an integer below 2^24 in magnitude: a
        float32 engine computes the program exactly (docs/wai-ops.md)."""
        return self.largest < (1 << 24)

    @property
    def operation_count(self) -> int:
        return len(self.operations)


def _members(
    obj: object,
    where: str,
    required: set[str],
    optional: set[str] = set(),  # noqa: B006
) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise WaiOpsError(f"wai-ops program: {where} is not an object")
    unknown = set(obj) - required - optional
    if unknown:
        raise WaiOpsError(f"wai-ops program: {where} has unknown members {sorted(unknown)}")
    missing = required - set(obj)
    if missing:
        raise WaiOpsError(f"wai-ops program: {where} lacks {sorted(missing)}")
    return obj


def _name(v: object, where: str) -> str:
    if not isinstance(v, str) or not v or len(v) > 200:
        raise WaiOpsError(f"wai-ops program: {where} is not a name")
    return v


def parse_program(doc: object, tensors: dict[str, np.ndarray]) -> Program:
    """The program ``doc`` (parsed JSON) over ``tensors``, every member validated; its bounds
    are not proven yet (:func:`paths.waiops.bounds.prove`)."""
    top = _members(doc, "the program", {"format", "input", "output", "operations"})
    if top["format"] != FORMAT:
        raise WaiOpsError(f"wai-ops program: format {top['format']!r} is not {FORMAT!r}")
    inp = _members(top["input"], "input", {"name", "channels", "range"})
    out = _members(top["output"], "output", {"name", "channels"})
    if not _int_in(1, 4096)(inp["channels"]) or not _int_in(1, 4096)(out["channels"]):
        raise WaiOpsError("wai-ops program: channels must be integers in 1…4096")
    if not _pair(inp["range"]):
        raise WaiOpsError("wai-ops program: input.range is [lo, hi], int32, lo <= hi")
    ops_doc = top["operations"]
    if not isinstance(ops_doc, list) or not ops_doc or len(ops_doc) > 1024:
        raise WaiOpsError("wai-ops program: operations is a list of 1…1024 operations")
    channels: dict[str, int] = {_name(inp["name"], "input.name"): inp["channels"]}
    names: set[str] = set()
    used: set[str] = set()
    operations: list[Operation] = []
    for k, raw in enumerate(ops_doc):
        operation = _operation(raw, k, channels, names, tensors, used)
        channels[operation.output] = operation.channels
        operations.append(operation)
    extra = sorted(set(tensors) - used)
    if extra:
        raise WeightsMismatch(f"wai-ops weights: tensors no operation names: {extra[:5]}")
    out_name = _name(out["name"], "output.name")
    if out_name not in channels or out_name == inp["name"]:
        raise WaiOpsError(f"wai-ops program: output {out_name!r} is never produced")
    if channels[out_name] != out["channels"]:
        raise WaiOpsError(
            f"wai-ops program: output {out_name!r} has {channels[out_name]} channels, "
            f"not {out['channels']}"
        )
    return Program(
        inp["name"],
        inp["channels"],
        (inp["range"][0], inp["range"][1]),
        out_name,
        out["channels"],
        tuple(operations),
    )


def _operation(
    raw: object,
    k: int,
    channels: dict[str, int],
    names: set[str],
    tensors: dict[str, np.ndarray],
    used: set[str],
) -> Operation:
    obj = _members(raw, f"operations[{k}]", {"op", "name", "inputs", "output"}, {"attrs", "params"})
    name = _name(obj["name"], f"operations[{k}].name")
    if name in names:
        raise WaiOpsError(f"wai-ops program: operation name {name!r} is used twice")
    names.add(name)
    op = obj["op"]
    spec = OPS.get(op) if isinstance(op, str) else None
    if spec is None:
        raise UnknownOp(f"{name}: wai-ops/1 defines no operation {op!r}")
    inputs = obj["inputs"]
    if not isinstance(inputs, list) or len(inputs) != spec.arity:
        raise WaiOpsError(f"{name}: {op} takes {spec.arity} input(s)")
    for v in inputs:
        if not isinstance(v, str) or v not in channels:
            raise WaiOpsError(f"{name}: input {v!r} is not a value produced before it")
    output = _name(obj["output"], f"{name}.output")
    if output in channels:
        raise WaiOpsError(f"{name}: value {output!r} is assigned twice")
    attrs = obj.get("attrs", {})
    params_doc = obj.get("params", {})
    if not isinstance(attrs, dict) or not isinstance(params_doc, dict):
        raise WaiOpsError(f"{name}: attrs and params are objects")
    for group, got, want in (
        ("attribute", attrs, spec.attrs),
        ("parameter", params_doc, spec.params),
    ):
        unknown = sorted(set(got) - set(want))
        if unknown:
            raise UnknownAttribute(f"{name}: {op} has no {group} {unknown[0]!r}")
        missing = sorted(set(want) - set(got))
        if missing:
            raise UnknownAttribute(f"{name}: {op} needs the {group} {missing[0]!r}")
    for key, ok in spec.attrs.items():
        if not ok(attrs[key]):
            raise WaiOpsError(f"{name}: attribute {key}={attrs[key]!r} is not allowed")
    params: dict[str, np.ndarray] = {}
    for key, dtypes in spec.params.items():
        tname = params_doc[key]
        if not isinstance(tname, str) or tname not in tensors:
            raise WeightsMismatch(f"{name}: weights tensor {tname!r} ({key}) is missing")
        arr = tensors[tname]
        if arr.dtype.name not in dtypes:
            raise WeightsMismatch(
                f"{name}: tensor {tname!r} is {arr.dtype.name}, {key} must be {' or '.join(dtypes)}"
            )
        used.add(tname)
        params[key] = arr.astype(np.int64)
    c_in = channels[inputs[0]]
    if spec.arity == 2 and channels[inputs[1]] != c_in:
        raise WaiOpsError(f"{name}: {op} of {c_in} and {channels[inputs[1]]} channels")
    c_out = _check_shapes(op, name, attrs, params, c_in, params_doc)
    return Operation(op, name, tuple(inputs), output, dict(attrs), params, c_out)


def _shape(name: str, tname: str, arr: np.ndarray, want: tuple[int, ...]) -> None:
    if tuple(arr.shape) != want:
        raise WeightsMismatch(
            f"{name}: tensor {tname!r} has shape {list(arr.shape)}, not {list(want)}"
        )


def _check_shapes(
    op: str,
    name: str,
    attrs: Mapping[str, Any],
    p: Mapping[str, np.ndarray],
    c: int,
    tnames: Mapping[str, str],
) -> int:
    """Check every parameter's shape and values; return the output's channel count."""
    if op == "channel_affine":
        _shape(name, tnames["scale"], p["scale"], (c,))
        _shape(name, tnames["offset"], p["offset"], (c,))
        return c
    if op in ("conv2d", "conv_transpose2d"):
        k = attrs["kernel"]
        if attrs["padding"] >= k:
            raise WaiOpsError(f"{name}: padding {attrs['padding']} must be below kernel {k}")
        if op == "conv_transpose2d" and attrs["output_padding"] >= attrs["stride"]:
            raise WaiOpsError(f"{name}: output_padding must be below stride")
        if op == "conv2d" and k % 2 == 0:
            raise WaiOpsError(f"{name}: conv2d kernel {k} must be odd")
        w = p["weight"]
        if w.ndim != 4:
            raise WeightsMismatch(f"{name}: tensor {tnames['weight']!r} is not 4-D")
        co = int(w.shape[0] if op == "conv2d" else w.shape[1])
        want = (co, c, k, k) if op == "conv2d" else (c, co, k, k)
        _shape(name, tnames["weight"], w, want)
        _shape(name, tnames["bias"], p["bias"], (co,))
        return co
    if op == "requantize":
        _shape(name, tnames["multiplier"], p["multiplier"], (c,))
        _shape(name, tnames["shift"], p["shift"], (c,))
        _values(name, tnames["multiplier"], p["multiplier"], 0, INT32_MAX)
        _values(name, tnames["shift"], p["shift"], 0, 30)
        return c
    if op == "igdn":
        _shape(name, tnames["gamma"], p["gamma"], (c, c))
        _shape(name, tnames["beta"], p["beta"], (c,))
        _shape(name, tnames["shift"], p["shift"], (c,))
        _values(name, tnames["gamma"], p["gamma"], 0, INT32_MAX)
        _values(name, tnames["beta"], p["beta"], 0, INT32_MAX)
        _values(name, tnames["shift"], p["shift"], 0, 30)
        return c
    return c  # add, mul


def _values(name: str, tname: str, arr: np.ndarray, lo: int, hi: int) -> None:
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise WeightsMismatch(f"{name}: tensor {tname!r} has values outside {lo}…{hi}")
