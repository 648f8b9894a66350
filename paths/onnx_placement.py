"""Where the ONNX Runtime path ran (§5): the program's operations, and the units ONNX Runtime's
own profiler states for the runtime nodes derived from each (docs/onnx-path.md says how an
operation is attributed). Pure functions over a profiling trace, plus the one call that makes a
trace; ``paths.onnx`` re-exports the public ones."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.report import Placement
from wai_dispatch.paths.job import SynthesisJob

_UNIT_OF_PROVIDER = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "gpu",
    "WebGpuExecutionProvider": "gpu",
}

_NOT_OPERATIONS = frozenset({"Constant", "MemcpyToHost", "MemcpyFromHost"})
#: Runtime nodes that move, copy or re-lay the program's data without computing on it.
_LAYOUT_OPS = frozenset(
    {
        *_NOT_OPERATIONS,
        "ReorderInput",
        "ReorderOutput",
        "Reshape",
        "Shape",
        "Concat",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Identity",
        "DepthToSpace",
        "SpaceToDepth",
        "Expand",
        "Slice",
        "Split",
        "Gather",
        "Cast",
    }
)
_UNIT_RANK = {"gpu": 2, "cpu": 1, "unknown": 0}


def placement_from_trace(events: Sequence[Mapping[str, Any]]) -> Placement:
    """The runtime graph's node counts from an ONNX Runtime profiling trace: each node that ran
    is counted once, on the unit of the execution provider that ran it. ``Constant`` nodes and
    the host/device copies (``MemcpyToHost``, ``MemcpyFromHost``) are left out. This is *not*
    §5's placement (that counts the program's operations: :func:`placement_of_program`);
    ``wai-dispatch plan --json`` shows it beside the placement, as ``runtime_nodes``."""
    counts = {"cpu": 0, "gpu": 0, "unknown": 0}
    for node in _trace_nodes(events).values():
        if node.op not in _NOT_OPERATIONS:
            counts[node.unit] += 1
    return Placement(**counts)


@dataclass(frozen=True)
class _RanNode:
    """One node of the runtime graph as the trace states it."""

    unit: str  # "cpu", "gpu" or "unknown": from the execution provider that ran it
    op: str
    micros: int  # kernel time, summed over its runs


def _trace_nodes(events: Sequence[Mapping[str, Any]]) -> dict[str, _RanNode]:
    """The trace's kernel events by runtime node name (a node run twice is one node)."""
    nodes: dict[str, _RanNode] = {}
    suffix = "_kernel_time"
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") != "Node" or not name.endswith(suffix):
            continue
        args = event.get("args") or {}
        node_name = name[: -len(suffix)]
        unit = _UNIT_OF_PROVIDER.get(str(args.get("provider")), "unknown")
        micros = int(event.get("dur", 0) or 0)
        seen = nodes.get(node_name)
        if seen is not None:
            micros += seen.micros
        nodes[node_name] = _RanNode(unit, str(args.get("op_name", "")), micros)
    return nodes


def program_operations(model: Any) -> list[str]:
    """The names of the program's operations (an ``onnx.ModelProto``'s top-level nodes),
    constants left out (§5). Nodes the set leaves unnamed, or names given twice, are named
    here (``<op>_<index>``) so that each operation can be found in the trace."""
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        if not node.name or node.name in seen:
            node.name = f"{node.op_type}_{index}" if not node.name else f"{node.name}_{index}"
        seen.add(node.name)
    return [n.name for n in model.graph.node if n.op_type not in _NOT_OPERATIONS]


def placement_of_program(
    operations: Sequence[str], events: Sequence[Mapping[str, Any]]
) -> Placement:
    """§5's placement: each of the program's ``operations`` counted once, on the unit whose
    execution provider ran the runtime nodes derived from it (docs/onnx-path.md).

    A runtime node derives from the operation whose name is the longest prefix of its own
    (fusions and our rewrite name what they make after the node they replace); nodes derived
    from none are the runtime's. An operation on several units is where the most kernel time of
    its computing nodes ran; one with no node of its own ran where everything ran when the
    session used one unit, else ``unknown``.
    """
    nodes = _trace_nodes(events)
    longest_first = sorted(set(operations), key=len, reverse=True)
    derived: dict[str, list[_RanNode]] = {op: [] for op in operations}
    for name, node in nodes.items():
        origin = next((op for op in longest_first if _derives(name, op)), None)
        if origin is not None:
            derived[origin].append(node)
    units = {node.unit for node in nodes.values() if node.op not in _NOT_OPERATIONS}
    counts = {"cpu": 0, "gpu": 0, "unknown": 0}
    for op in operations:
        counts[_unit_of(derived[op], units)] += 1
    return Placement(**counts)


def _derives(node_name: str, operation: str) -> bool:
    return node_name == operation or (
        node_name.startswith(operation) and node_name[len(operation)] in "._/"
    )


def _unit_of(nodes: Sequence[_RanNode], session_units: set[str]) -> str:
    if not nodes:
        return next(iter(session_units)) if len(session_units) == 1 else "unknown"
    if len({n.unit for n in nodes}) == 1:
        return nodes[0].unit
    arithmetic = [n for n in nodes if n.op not in _LAYOUT_OPS] or list(nodes)
    time: dict[str, int] = {}
    for node in arithmetic:
        time[node.unit] = time.get(node.unit, 0) + node.micros
    # Most kernel time first; on a tie, the accelerator (where the arithmetic was sent).
    return max(time, key=lambda unit: (time[unit], _UNIT_RANK[unit]))


def _profiled_trace(
    ort: Any,
    model: bytes,
    so: Any,
    configure: Callable[[Any], dict[str, Any]],
    input_name: str,
    shape: tuple[int | None, ...],
    job: SynthesisJob,
) -> list[dict[str, Any]]:
    """Build a twin session with profiling on, run it once on a small input, and return its
    trace's events (§5). ``configure`` gives the options the path's provider and returns
    ``InferenceSession``'s keywords. The trace lives in a temporary directory, removed after."""
    latent_shape = tuple(int(n) for n in getattr(job.latent, "shape", ()))
    dims = []
    for i, d in enumerate(shape):
        if d is not None:
            dims.append(d)
        elif i == 1 and len(latent_shape) > 1:  # channels: the job's
            dims.append(latent_shape[1])
        else:
            dims.append(1 if i == 0 else 2)
    with tempfile.TemporaryDirectory(prefix="wai-ort-profile-") as tmp:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tmp, "plan")
        session = ort.InferenceSession(model, so, **configure(so))
        session.run(None, {input_name: np.zeros(dims, dtype=np.float32)})
        trace = session.end_profiling()
        with open(trace, encoding="utf-8") as f:
            events: list[dict[str, Any]] = strictjson.loads(f.read())
    return events
