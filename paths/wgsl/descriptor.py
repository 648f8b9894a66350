"""Kernel descriptors of the ``gpu/wgsl/integer`` path: load and validate them (JSON Schema),
evaluate their ``derive`` expressions with simpleeval, choose the first variant whose contract
holds and whose needs fit the device's limits, and plan the row bands a large tensor is tiled
into. Nothing here touches a device: a shape no variant admits is refused (:class:`ShapeRefused`,
``dispatch_shape_mismatch``) before anything is submitted.

An expression sees ``shapes`` / ``ranks``, ``dtypes``, ``attrs``, ``tunables``, ``device.limits``
(WebGPU's names), ``typesOk``, ``attrsOk``, the ``derive`` names before it and, for bands and
uniforms, ``band`` (``outRow0``, ``rows``, ``inRow0``, ``inRows``). Functions: ``dim``,
``numel``, ``ceilDiv``, ``sameShape``, ``min``, ``max``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.tokens import Code

_PACKAGE = "wai_dispatch.paths.wgsl"


class DescriptorInvalid(ValueError):
    """A descriptor that fails the schema or whose expression does not evaluate: a bug in this
    build's data, found by the tests, never the client's input."""


class ShapeRefused(Exception):
    """No variant of a kernel admits the shapes, attributes or the device's limits (§4:
    ``dispatch_shape_mismatch``). ``limits`` names each device limit a variant exceeded."""

    code = Code.SHAPE_MISMATCH

    def __init__(self, message: str, limits: Sequence[str] = ()):
        super().__init__(message)
        self.limits = tuple(limits)


def _ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


_FUNCTIONS = {
    "dim": lambda shape, i: int(shape[i]),
    "numel": _numel,
    "ceilDiv": _ceil_div,
    "sameShape": lambda a, b: list(a) == list(b),
    "min": min,
    "max": max,
}


def _evaluate(expr: str, names: Mapping[str, Any], where: str) -> Any:
    from simpleeval import EvalWithCompoundTypes

    try:
        return EvalWithCompoundTypes(names=dict(names), functions=_FUNCTIONS).eval(expr)
    except Exception as exc:
        raise DescriptorInvalid(f"{where}: {expr!r} does not evaluate ({exc})") from exc


@dataclass(frozen=True)
class Band:
    """One dispatch of a kernel: output rows ``[out_row0, out_row0 + rows)`` read from input
    rows ``[in_row0, in_row0 + in_rows)`` (clipped to the tensor)."""

    out_row0: int
    rows: int
    in_row0: int
    in_rows: int

    def names(self) -> dict[str, int]:
        return {
            "outRow0": self.out_row0,
            "rows": self.rows,
            "inRow0": self.in_row0,
            "inRows": self.in_rows,
        }


@dataclass(frozen=True)
class KernelPlan:
    """A kernel chosen for one operation on one device: its variant, output shape, band
    height and everything needed to render, bind and dispatch it."""

    descriptor: Descriptor
    variant: Mapping[str, Any]
    names: Mapping[str, Any]
    out_shape: tuple[int, ...]
    band_rows: int

    @property
    def whole(self) -> bool:
        """One band covers the output: the tensors stay on the device."""
        return self.band_rows >= self.out_shape[2]

    @property
    def template(self) -> str:
        return str(self.variant["template"])

    @property
    def bindings(self) -> list[Mapping[str, Any]]:
        return list(self.descriptor.doc["bindingSets"][self.variant["bindingSet"]])

    def bands(self) -> Iterator[Band]:
        """The output's row bands, in order, with the input rows each reads."""
        height, in_height = self.out_shape[2], int(self.names["shapes"]["X"][2])
        band_doc = self.descriptor.doc["band"]
        for r0 in range(0, height, self.band_rows):
            rows = min(self.band_rows, height - r0)
            names = {**self.names, "band": {"outRow0": r0, "rows": rows}}
            first = _evaluate(band_doc["inFirst"], names, f"{self.descriptor.name}.band")
            last = _evaluate(band_doc["inLast"], names, f"{self.descriptor.name}.band")
            first, last = max(0, int(first)), min(in_height - 1, int(last))
            yield Band(r0, rows, first, max(0, last - first + 1))

    def uniform(self, band: Band) -> list[tuple[str, str, int]]:
        """The uniform struct's fields for one band: (name, WGSL type, value)."""
        names = {**self.names, "band": band.names()}
        fields: list[tuple[str, str, int]] = []
        for binding in self.bindings:
            struct = binding.get("struct")
            if struct is None:
                continue
            for field in struct["fields"]:
                value = _evaluate(field["value"], names, f"{self.descriptor.name}.{field['name']}")
                fields.append((field["name"], field["type"], int(value)))
        return fields

    def dispatch(self, band: Band) -> tuple[int, int]:
        """Workgroups (x, y) for one band: a 2-D grid with one invocation per output position
        and group of ``CHANNELS_PER_INVOCATION`` output channels."""
        count = int(self.names["channelGroups"]) * band.rows * self.out_shape[3]
        groups = _ceil_div(count, self.names["tunables"]["WORKGROUP_SIZE"])
        x = max(
            1, min(groups, int(self.names["device"]["limits"]["maxComputeWorkgroupsPerDimension"]))
        )
        return x, max(1, _ceil_div(groups, x))


@dataclass(frozen=True)
class Descriptor:
    """One validated kernel descriptor (``descriptors/<name>.json``)."""

    doc: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.doc["name"])

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(self.doc["ops"])

    def names(
        self,
        shapes: Mapping[str, Sequence[int]],
        dtypes: Mapping[str, str],
        attrs: Mapping[str, Any],
        limits: Mapping[str, int],
        op: str,
    ) -> dict[str, Any]:
        """The expression namespace for one operation, ``derive`` evaluated in order."""
        names: dict[str, Any] = {
            "shapes": {k: [int(d) for d in v] for k, v in shapes.items()},
            "ranks": {k: len(v) for k, v in shapes.items()},
            "dtypes": {},
            "attrs": dict(attrs),
            "tunables": dict(self.doc["tunables"]),
            "device": {"limits": dict(limits)},
            "op": op,
        }
        types_ok = True
        for tensor in self.doc["inputs"]:
            role, var = tensor["role"], tensor["dtype"]
            got = dtypes.get(role, "")
            if role not in shapes or len(shapes[role]) != tensor["rank"]:
                types_ok = False
            allowed = self.doc["typeConstraints"][var]
            if got not in allowed or names["dtypes"].setdefault(var, got) != got:
                types_ok = False
        names["typesOk"] = types_ok
        names["attrsOk"] = self._attrs_ok(attrs)
        if not (types_ok and names["attrsOk"]):
            return names  # derive may index missing shapes: the contracts see typesOk first
        for key, expr in self.doc["derive"].items():
            names[key] = _evaluate(expr, names, f"{self.name}.derive.{key}")
        return names

    def _attrs_ok(self, attrs: Mapping[str, Any]) -> bool:
        spec = self.doc["attributes"]
        if set(attrs) != set(spec):
            return False
        for key, rule in spec.items():
            value = attrs[key]
            values = list(value) if rule["kind"] == "pair" else [value]
            if rule["kind"] == "pair" and (len(values) != 2 or values[0] > values[1]):
                return False
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int):
                    return False
                if v < rule.get("min", -(1 << 31)) or v > rule.get("max", (1 << 31) - 1):
                    return False
        return True

    def plan(
        self,
        shapes: Mapping[str, Sequence[int]],
        dtypes: Mapping[str, str],
        attrs: Mapping[str, Any],
        limits: Mapping[str, int],
        op: str | None = None,
    ) -> KernelPlan:
        """The first variant whose contract holds and whose needs fit ``limits``; else
        :class:`ShapeRefused` saying, for each variant, the contract or the limit it broke."""
        op = op or self.ops[0]
        if op not in self.ops:
            raise ShapeRefused(f"{self.name}: does not compute {op!r}")
        base = self.names(shapes, dtypes, attrs, limits, op)
        why: list[str] = []
        exceeded: list[str] = []
        for variant in self.doc["variants"]:
            where = f"{self.name}.{variant['name']}"
            if not (base["typesOk"] and base["attrsOk"]):
                why.append(f"{variant['name']}: dtypes, ranks or attributes outside constraints")
                continue
            names = dict(base)
            for key, expr in variant["derive"].items():
                names[key] = _evaluate(expr, names, f"{where}.derive.{key}")
            if not _evaluate(variant["contract"], names, f"{where}.contract"):
                why.append(f"{variant['name']}: contract {variant['contract']!r} is false")
                continue
            over = []
            for limit, expr in variant["limits"].items():
                need = int(_evaluate(expr, names, f"{where}.limits.{limit}"))
                have = int(limits[limit])
                if need > have:
                    over.append(f"{limit} {need} > {have}")
                    exceeded.append(limit)
            if over:
                why.append(f"{variant['name']}: needs " + ", ".join(over))
                continue
            out = _evaluate(self.doc["outputs"][0]["shape"], names, f"{self.name}.outputs")
            return KernelPlan(
                self, variant, names, tuple(int(d) for d in out), int(names["bandRows"])
            )
        raise ShapeRefused(f"{self.name}: no variant admits the shape ({'; '.join(why)})", exceeded)


def _schema() -> Mapping[str, Any]:
    text = resources.files(_PACKAGE).joinpath("descriptor.schema.json").read_text("utf-8")
    loaded: Mapping[str, Any] = strictjson.loads(text)
    return loaded


def validate(doc: object) -> Descriptor:
    """``doc`` checked against the schema and for its own references (binding sets,
    templates, type variables), or :class:`DescriptorInvalid` saying where."""
    import jsonschema

    try:
        jsonschema.validate(doc, _schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise DescriptorInvalid(f"descriptor fails the schema at /{where}: {exc.message}") from exc
    assert isinstance(doc, dict)
    templates = resources.files(_PACKAGE).joinpath("templates")
    for variant in doc["variants"]:
        if variant["bindingSet"] not in doc["bindingSets"]:
            raise DescriptorInvalid(f"{doc['name']}: no binding set {variant['bindingSet']!r}")
        if not templates.joinpath(variant["template"]).is_file():
            raise DescriptorInvalid(f"{doc['name']}: no template {variant['template']!r}")
    for tensor in doc["inputs"] + doc["outputs"]:
        if tensor["dtype"] not in doc["typeConstraints"]:
            raise DescriptorInvalid(f"{doc['name']}: no type constraint {tensor['dtype']!r}")
    return Descriptor(doc)


@functools.cache
def descriptors() -> dict[str, Descriptor]:
    """Every descriptor this build ships, by the ``wai-ops/1`` operation it computes."""
    folder = resources.files(_PACKAGE).joinpath("descriptors")
    by_op: dict[str, Descriptor] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            descriptor = validate(strictjson.loads(entry.read_text("utf-8")))
            for op in descriptor.ops:
                by_op[op] = descriptor
    return by_op


@functools.cache
def render(descriptor: str, variant: str, op: str) -> str:
    """The WGSL source of a variant's template, rendered from the descriptor's tunables, its
    binding set (declarations and the uniform struct) and the op (for kernels that compute
    more than one). The same arguments always give the same source."""
    import jinja2

    doc = next(d for d in descriptors().values() if d.name == descriptor).doc
    chosen = next(v for v in doc["variants"] if v["name"] == variant)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(_PACKAGE, "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    bindings = doc["bindingSets"][chosen["bindingSet"]]
    return env.get_template(chosen["template"]).render(**doc["tunables"], op=op, bindings=bindings)
