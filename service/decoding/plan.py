"""A path's plan for a set without decoding (``wai-dispatch plan``): §3, §4's device
questions and the backend's plan (§5), asked through :func:`dispatch.ask_path`, the one place
:func:`dispatch.choose` asks them too."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec.errors import check_latent_shape
from wai_dispatch.codec.sets import MANIFEST_NAME, LoadedSet, Manifest, SetFileMissing, load
from wai_dispatch.codec.sets.loaded import read_exact
from wai_dispatch.dispatch import (
    NPU_MODEL_RUNTIME,
    Adapter,
    Code,
    DispatchPath,
    Placement,
    ask_path,
    strictjson,
)
from wai_dispatch.dispatch.errors import InvalidArgument
from wai_dispatch.paths.coreml_set import program_shape
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.registry import absent_reason
from wai_dispatch.service.decoding.prepare import Machine
from wai_dispatch.service.decoding.results import PlanResult, failure_text

log = logging.getLogger("wai_dispatch.decode")


def plan_path(
    machine: Machine,
    path: DispatchPath,
    files: LoadedSet,
    latent_shape: tuple[int, ...] | None = None,
) -> PlanResult:
    """``path``'s plan for the set ``files`` on ``machine``: the latent shape (the one given,
    else the set's; checked against the limits before the latent is allocated), then
    :func:`dispatch.ask_path`."""
    adapter = machine.adapters.get(path)
    shape = latent_shape if latent_shape is not None else _stated_shape(adapter, files, path)
    check_latent_shape(shape, machine.limits, what="the latent")
    cap = machine.capabilities.get(files.capability)
    job = machine.job(files, np.zeros(shape, np.float32), np.zeros(shape, np.int32))
    answer = ask_path(path, None if cap is None else cap.registered_tier, cap, adapter, job)
    reason: str | None = None
    if answer.code is not None:
        if answer.error is not None:
            reason = str(answer.error) or type(answer.error).__name__
        elif answer.code is Code.UNIT_ABSENT:
            reason = absent_reason(adapter)
        elif answer.code is Code.NOT_PLACED and answer.placement is not None:
            counts = " ".join(f"{k}={v}" for k, v in answer.placement.to_json().items())
            reason = f"{answer.code.meaning} ({counts})"
        else:
            reason = answer.code.meaning
    return PlanResult(
        files.digest,
        files.capability,
        path,
        tuple(shape),
        answer.placement,
        answer.code,
        reason,
        _runtime_nodes(adapter, job, path) if answer.placement is not None else None,
    )


def _runtime_nodes(adapter: Any, job: SynthesisJob, path: DispatchPath) -> Placement | None:
    """The runtime graph's node counts where the adapter states them (ONNX Runtime's
    ``runtime_nodes``), for ``plan --json``; ``None`` elsewhere or when that fails."""
    nodes = getattr(adapter, "runtime_nodes", None)
    if not callable(nodes):
        return None
    try:
        counts = nodes(job)
    except Exception as exc:  # the placement was answered; a statement beside it is optional
        log.warning(
            "path %s: the runtime's node counts not read: %s",
            path,
            failure_text(exc),
            exc_info=exc,
            extra={"dispatch_path": str(path)},
        )
        return None
    return counts if isinstance(counts, Placement) else None


def _stated_shape(adapter: Adapter | None, files: LoadedSet, path: DispatchPath) -> tuple[int, ...]:
    """The program's fixed input (Core ML, §6.1) where its unit is here, else a latent
    shape the set's facts state."""
    if path == NPU_MODEL_RUNTIME and adapter is not None and adapter.unit_present():
        # Reading the program's input needs coremltools (which pulls in torch): only worth
        # it where Core ML can run; elsewhere the path is refused before its shape is asked.

        try:
            shape = program_shape(files)
        except ValueError as exc:
            # the adapter says what is wrong with the program, as its refusal
            log.info(
                "path %s: the program states no input shape: %s",
                path,
                exc,
                extra={"dispatch_path": str(path)},
            )
            shape = None
        if shape is not None:
            return shape
    stated = files.facts.stated_shape() or _payload_shape(files)
    if stated is None:
        raise InvalidArgument(
            f"set {files.digest[:16]}… states no latent shape: give --latent-shape N,C,H,W",
        )
    return stated


def load_set_dir(directory: Path) -> LoadedSet:
    """A set folder outside the store: its set.json names the digest its files are checked
    against, as the store checks an installed set."""
    data = read_exact(directory / MANIFEST_NAME, 1 << 20)
    if data is None:
        raise SetFileMissing(f"{directory / MANIFEST_NAME}: cannot be read (no such file)")
    return load(directory, Manifest.from_bytes(data).digest)


def _payload_shape(files: LoadedSet) -> tuple[int, ...] | None:
    """The latent shape of the set's own payload (``payload_info``): a default for a program
    that takes any shape (the wai-ops interpreter's)."""

    name = files.facts.payload_info_file
    if not files.has(name):
        return None
    try:
        shape = strictjson.loads(files.read(name)).get("latent_shape")
    except (ValueError, AttributeError):
        return None
    if isinstance(shape, list) and shape and all(type(d) is int for d in shape):
        return tuple(shape)
    return None
