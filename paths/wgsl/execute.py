"""Run a ``wai-ops/1`` program (read duck-typed, as :class:`paths.waiops.program.Program` has it)
through the WGSL kernels: plan every operation against the device's limits first, then dispatch
operation after operation. Values stay on the device while plans are ``whole``; a ``banded``
plan moves its input to the host and runs one band of rows at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_dispatch.paths.wgsl.descriptor import Band, KernelPlan, ShapeRefused, descriptors, render
from wai_dispatch.paths.wgsl.runner import Runner, check_binding_sizes

_SECOND = "X2"  # the role of a binary operation's second input


def _dtype_of(values: np.ndarray, allowed: Sequence[str]) -> str:
    """The first of the descriptor's ``allowed`` dtypes that holds every value of a parameter
    (the program loader has checked each parameter's declared dtype; its arrays arrive
    widened to int64), else ``int64``, which no constraint admits."""
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for name in allowed:
        info = np.iinfo(name)
        if info.min <= lo and hi <= info.max:
            return name
    return "int64"


def plan_operation(
    op: Any, shape: Sequence[int], limits: Mapping[str, int], second: Sequence[int] | None = None
) -> KernelPlan:
    """The kernel plan of one operation whose input has ``shape`` ([1, C, H, W])."""
    descriptor = descriptors().get(op.op)
    if descriptor is None:
        raise ShapeRefused(f"{op.name}: no WGSL kernel computes {op.op!r}")
    shapes: dict[str, Sequence[int]] = {"X": list(shape)}
    dtypes: dict[str, str] = {"X": "int32"}
    if second is not None:
        shapes[_SECOND], dtypes[_SECOND] = list(second), "int32"
    type_vars = {t["role"]: t["dtype"] for t in descriptor.doc["inputs"]}
    constraints = descriptor.doc["typeConstraints"]
    for role, values in op.params.items():
        shapes[role] = list(np.shape(values))
        allowed = constraints.get(type_vars.get(role, ""), ())
        dtypes[role] = _dtype_of(np.asarray(values), allowed)
    try:
        return descriptor.plan(shapes, dtypes, dict(op.attrs), limits, op.op)
    except ShapeRefused as exc:
        raise ShapeRefused(f"{op.name}: {exc}", exc.limits) from exc


def plan_program(program: Any, shape: Sequence[int], limits: Mapping[str, int]) -> list[KernelPlan]:
    """Every operation's plan for an input of ``shape``, in order, or :class:`ShapeRefused`."""
    shapes: dict[str, tuple[int, ...]] = {program.input_name: tuple(int(d) for d in shape)}
    plans = []
    for op in program.operations:
        second = shapes[op.inputs[1]] if len(op.inputs) > 1 else None
        plan = plan_operation(op, shapes[op.inputs[0]], limits, second)
        shapes[op.output] = plan.out_shape
        plans.append(plan)
    return plans


@dataclass
class _Value:
    """A tensor [C, H, W] int32: on the device (``buffer``), on the host, or both."""

    shape: tuple[int, int, int]
    buffer: Any = None
    host: np.ndarray | None = None

    def on_device(self, runner: Runner) -> Any:
        if self.buffer is None:
            assert self.host is not None
            self.buffer = runner.upload(self.host)
        return self.buffer

    def on_host(self, runner: Runner) -> np.ndarray:
        if self.host is None:
            count = self.shape[0] * self.shape[1] * self.shape[2]
            self.host = runner.read(self.buffer, count).reshape(self.shape)
        return self.host


def run_program(
    runner: Runner,
    program: Any,
    symbols: np.ndarray,
    constants: MutableMapping[tuple[str, str], Any] | None = None,
    limits: Mapping[str, int] | None = None,
) -> np.ndarray:
    """The program's output (int32 [1, C, H, W]) for ``symbols`` (integers [1, C, h, w]),
    computed by the kernels. ``constants`` caches the weights' device buffers by (operation,
    parameter) for the program's set; ``limits`` (default: the device's) may be lower than
    the device's, to force tiling."""
    limits = runner.limits if limits is None else limits
    x = np.asarray(symbols)
    plans = plan_program(program, x.shape, limits)  # refuses before anything is submitted
    constants = {} if constants is None else constants
    last_use: dict[str, int] = {}
    for k, op in enumerate(program.operations):
        for name in op.inputs:
            last_use[name] = k
    shape3 = (int(x.shape[1]), int(x.shape[2]), int(x.shape[3]))
    values = {program.input_name: _Value(shape3, host=x[0].astype(np.int32))}
    for k, (op, plan) in enumerate(zip(program.operations, plans, strict=True)):
        inputs = [values[name] for name in op.inputs]
        values[op.output] = _run(runner, op, plan, inputs, constants, limits)
        for name in set(op.inputs):
            if last_use[name] == k and name != program.output_name:
                del values[name]
    return values[program.output_name].on_host(runner)[None].astype(np.int32)


def _constant(
    runner: Runner, op: Any, role: str, constants: MutableMapping[tuple[str, str], Any]
) -> Any:
    key = (op.name, role)
    buffer = constants.get(key)
    if buffer is None:  # widened exactly to i32: every wai-ops/1 parameter fits int32
        buffer = runner.upload(np.asarray(op.params[role], dtype=np.int64).astype(np.int32))
        constants[key] = buffer
    return buffer


def _run(
    runner: Runner,
    op: Any,
    plan: KernelPlan,
    inputs: list[_Value],
    constants: MutableMapping[tuple[str, str], Any],
    limits: Mapping[str, int],
) -> _Value:
    source = render(plan.descriptor.name, str(plan.variant["name"]), op.op)
    _, c, h, w = plan.out_shape
    data_roles = {"X": 0, _SECOND: 1}

    def dispatch(band: Band, data: Callable[[int, Band], Any], out: Any) -> None:
        """Bind the inputs (``data`` of their index and the band), the output and the constants;
        dispatch."""
        buffers = []
        for binding in plan.bindings:
            semantic = binding["semantic"]
            if semantic in data_roles:
                buffers.append(data(data_roles[semantic], band))
            elif semantic == "Y":
                buffers.append(out)
            elif semantic != "kernel.params":
                buffers.append(_constant(runner, op, semantic, constants))
        check_binding_sizes(limits, [b.size for b in buffers])
        uniform = [(kind, value) for _, kind, value in plan.uniform(band)]
        runner.dispatch(source, buffers, uniform, plan.dispatch(band))

    if plan.whole:
        (band,) = plan.bands()
        out = runner.output(c * h * w)
        dispatch(band, lambda i, _: inputs[i].on_device(runner), out)
        return _Value((c, h, w), buffer=out)
    hosts = [v.on_host(runner) for v in inputs]
    result = np.empty((c, h, w), dtype=np.int32)
    for band in plan.bands():
        out = runner.output(c * band.rows * w)
        dispatch(
            band, lambda i, b: runner.upload(hosts[i][:, b.in_row0 : b.in_row0 + b.in_rows]), out
        )
        result[:, band.out_row0 : band.out_row0 + band.rows] = runner.read(
            out, c * band.rows * w
        ).reshape(c, band.rows, w)
    return _Value((c, h, w), host=result)
