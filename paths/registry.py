"""The machine's adapters: one per path this build has code for, each built once, and what
``wai-dispatch paths`` says of an offer (§4: a path with no adapter is ``dispatch_unit_absent``).

A path gains an adapter by one entry in :data:`BUILDERS`: a function that builds it around the
one program cache (:mod:`paths.lru`) every adapter shares, so one byte budget bounds all paths'
programs. A path with no entry is reported absent with :data:`NO_ADAPTER`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from wai_dispatch.dispatch import (
    CPU_ONNX_RUNTIME,
    CPU_WAI_OPS,
    NPU_MODEL_RUNTIME,
    REFERENCE_OFFER,
    Adapter,
    Offer,
    Unit,
)
from wai_dispatch.dispatch.offer import GPU_ONNX_RUNTIME, GPU_WGSL, DispatchPath, parse_offer
from wai_dispatch.paths.coreml import CoreMLAdapter
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter
from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter
from wai_dispatch.paths.wgsl.adapter import WgslAdapter

#: The reason a path with no adapter in :data:`BUILDERS` is absent.
NO_ADAPTER = "no adapter in this build"


#: DispatchPath → the function that builds its adapter around a program cache. Order is irrelevant:
#: the offer orders paths.
BUILDERS: Mapping[DispatchPath, Callable[[Programs], Adapter]] = {
    NPU_MODEL_RUNTIME: lambda programs: CoreMLAdapter(programs=programs),
    CPU_ONNX_RUNTIME: lambda programs: OnnxRuntimeAdapter(Unit.CPU, programs=programs),
    GPU_ONNX_RUNTIME: lambda programs: OnnxRuntimeAdapter(Unit.GPU, programs=programs),
    CPU_WAI_OPS: WaiOpsAdapter,
    GPU_WGSL: lambda programs: WgslAdapter(programs=programs),
}


class PathStatus(NamedTuple):
    """One offered path as this machine has it: present, or absent with the reason."""

    path: DispatchPath
    present: bool
    reason: str | None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "path": self.path.to_json(),
            "present": self.present,
            "reason": self.reason,
        }
        device = getattr(known_adapters().get(self.path), "device", None)
        if self.present and callable(device):  # the hardware an adapter found, where it says
            out["device"] = device()
        return out


@functools.cache
def default_programs() -> Programs:
    """The program cache of this process's default adapters (:func:`known_adapters` without
    a cache), with the default budget."""
    return LRU(DEFAULT_PROGRAM_BYTES)


@functools.cache
def _built() -> tuple[dict[DispatchPath, Adapter], dict[DispatchPath, str]]:
    return _build(default_programs())


def _build(programs: Programs) -> tuple[dict[DispatchPath, Adapter], dict[DispatchPath, str]]:
    adapters: dict[DispatchPath, Adapter] = {}
    failures: dict[DispatchPath, str] = {}
    for path, build in BUILDERS.items():
        try:
            adapters[path] = build(programs)
        except ImportError as exc:
            # The adapter's module, or a module it needs at import, is missing: the backend
            # is absent (§4), and `paths` says which module.
            failures[path] = f"adapter cannot be imported ({exc})"
    return adapters, failures


def known_adapters(programs: Programs | None = None) -> dict[DispatchPath, Adapter]:
    """Every adapter this build has, by path. Without ``programs``: built once per process,
    sharing :func:`default_programs`; with it: built anew, every one keeping its programs in
    ``programs``. An adapter whose unit is absent is still here: it answers
    ``unit_present()`` with ``False`` (§4)."""
    return dict((_built() if programs is None else _build(programs))[0])


def adapters_for(program_cache_bytes: int | None) -> tuple[Programs, dict[DispatchPath, Adapter]]:
    """A decoder's program cache and adapters: without a budget, :func:`default_programs` and
    the process's adapters (built once); with one, adapters built anew around one cache of
    that budget."""
    if program_cache_bytes is None:
        return default_programs(), known_adapters()
    programs: Programs = LRU(program_cache_bytes)
    return programs, known_adapters(programs)


def probe(
    offer: Iterable[DispatchPath] | None = None,
    adapters: Mapping[DispatchPath, Adapter] | None = None,
) -> list[PathStatus]:
    """Each offered path, in order, present or absent with the reason (``wai-dispatch
    paths``), as ``adapters`` (default: :func:`known_adapters`) answer. ``offer`` defaults to
    the reference offer (the caller passes the ``offer`` setting). Asks only
    ``unit_present()``; no set is opened."""
    built, failures = _built()
    adapters = built if adapters is None else adapters
    rows: list[PathStatus] = []
    for path in parse_offer(REFERENCE_OFFER if offer is None else offer):
        adapter = adapters.get(path)
        if adapter is None:
            rows.append(PathStatus(path, False, failures.get(path, NO_ADAPTER)))
        elif adapter.unit_present():
            rows.append(PathStatus(path, True, None))
        else:
            rows.append(PathStatus(path, False, absent_reason(adapter)))
    return rows


def default_offer(adapters: Mapping[DispatchPath, Adapter] | None = None) -> Offer:
    """The offer of a decoder given none (docs/dispatch.md): the reference offer (§6.1), with
    ``gpu/onnx-runtime/float`` after the neural processor where its adapter (of ``adapters``,
    default :func:`known_adapters`) finds a hardware GPU (§4 lets the sink order its paths: a
    GPU runs the float synthesis faster than the CPU, at the same tier). A software adapter is
    no GPU (paths/onnx.py), so it changes nothing here."""
    gpu = (known_adapters() if adapters is None else adapters).get(GPU_ONNX_RUNTIME)
    if gpu is None or not gpu.unit_present():
        return REFERENCE_OFFER
    npu = [p for p in REFERENCE_OFFER if p.unit is Unit.NPU]
    rest = [p for p in REFERENCE_OFFER if p.unit is not Unit.NPU]
    return (*npu, GPU_ONNX_RUNTIME, *rest)


def absent_reason(adapter: Adapter | None) -> str:
    """The adapter's own words for why its unit is absent (:meth:`Adapter.absent_reason`),
    :data:`NO_ADAPTER` without an adapter, else §7's phrase."""
    if adapter is None:
        return NO_ADAPTER
    return adapter.absent_reason() or "the device has no such unit, or the backend is absent"
