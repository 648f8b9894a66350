"""The WebGPU path of the browser page (``gpu/wgsl/integer``): ``paths/wgsl``'s kernels and
descriptors, planned here for the browser's adapter limits, and the set's integer weights as one
int32 blob; the page binds, dispatches and reads back as :mod:`paths.wgsl.runner` does. A shape
no variant admits under those limits is ``{"refused": message, "limits"}`` (§4:
``dispatch_shape_mismatch``), decided before the page submits anything."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.dispatch import strictjson
from wai_dispatch.paths.lru import LRU
from wai_dispatch.paths.waiops.adapter import load_set_program
from wai_dispatch.paths.wgsl.descriptor import ShapeRefused, render
from wai_dispatch.paths.wgsl.execute import plan_program
from wai_dispatch.paths.wgsl.runner import LIMITS
from wai_dispatch.service.web.errors import PageBadRequest

#: The browser limits a plan reads (paths/wgsl/runner.py LIMITS); each a positive integer.
_MAX_LIMIT = 1 << 53


class WgslProgram:
    """A set's wai-ops/1 program and its constants blob, loaded once per set digest."""

    blob: bytes

    def __init__(self, files: LoadedSet) -> None:
        self.program = load_set_program(files)
        blob = bytearray()
        self.constants: dict[str, dict[str, int]] = {}
        for op in self.program.operations:
            for role, values in op.params.items():
                data = np.asarray(values, dtype=np.int64).astype("<i4").tobytes()
                self.constants[f"{op.name}/{role}"] = {"offset": len(blob), "count": len(data) // 4}
                blob += data
                blob += bytes(-len(blob) % 16)
        self.blob = bytes(blob)

    def plan(self, shape: Sequence[int], limits: Mapping[str, int]) -> dict[str, Any]:
        try:
            plans = plan_program(self.program, shape, limits)
        except ShapeRefused as exc:
            return {"refused": str(exc), "limits": list(exc.limits)}
        sources: list[str] = []
        index: dict[str, int] = {}
        operations = []
        for op, plan in zip(self.program.operations, plans, strict=True):
            source = render(plan.descriptor.name, str(plan.variant["name"]), op.op)
            if source not in index:
                index[source] = len(sources)
                sources.append(source)
            bindings = [str(b["semantic"]) for b in plan.bindings]
            bindings = [s for s in bindings if s != "kernel.params"]
            bands = [
                {
                    "uniform": [[kind, value] for _, kind, value in plan.uniform(band)],
                    "groups": list(plan.dispatch(band)),
                    "in_row0": band.in_row0,
                    "in_rows": band.in_rows,
                    "out_row0": band.out_row0,
                    "rows": band.rows,
                }
                for band in plan.bands()
            ]
            operations.append(
                {
                    "name": op.name,
                    "op": op.op,
                    "inputs": list(op.inputs),
                    "output": op.output,
                    "source": index[source],
                    "out_shape": list(plan.out_shape),
                    "whole": plan.whole,
                    "bindings": bindings,
                    "bands": bands,
                }
            )
        return {
            "input": self.program.input_name,
            "output": self.program.output_name,
            "sources": sources,
            "constants": self.constants,
            "operations": operations,
        }


def read_limits(text: str) -> dict[str, int]:
    """The browser adapter's limits as the page sends them (JSON object of positive ints)."""

    try:
        obj = strictjson.loads(text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict) or set(obj) != set(LIMITS):
        raise PageBadRequest(
            f"limits: a JSON object with exactly {', '.join(LIMITS)}",
        )
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_LIMIT:
            raise PageBadRequest(f"limits.{key}: a positive integer")
    return dict(obj)


def read_shape(text: str) -> list[int]:
    """The latent's shape as the page sends it: ``1,C,h,w``, each at most 65535."""
    try:
        shape = [int(p) for p in text.split(",")]
    except ValueError:
        shape = []
    if len(shape) != 4 or shape[0] != 1 or not all(0 < d <= 0xFFFF for d in shape):
        raise PageBadRequest("shape: 1,C,h,w with each dimension in 1 … 65535")
    return shape


class WgslPrograms:
    """Programs by set digest, the last two kept, each counted as its constants blob."""

    def __init__(self) -> None:
        self.cache: LRU[str, WgslProgram] = LRU(max_entries=2)

    def get(self, files: LoadedSet) -> WgslProgram:
        hit = self.cache.get(files.digest)
        if hit is not None:
            return hit
        program = WgslProgram(files)
        self.cache.put(files.digest, program, len(program.blob))
        return program
