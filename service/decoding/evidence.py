"""§8's evidence on the machine it runs on (``wai-dispatch evidence``): for each set, its payload
decoded on every path this build knows that is present here, and for each the figures §8's
table gives:

- the unit and placement the backend states (the report's ``ran``; ``placement`` ``null``
  where the backend states none), and the tier the decode holds;
- the symbols digest against the CPU reference's (the digest the set writer recorded);
- for a float capability, PSNR and samples differing of the RGB8 picture against the CPU
  reference's (``cpu/onnx-runtime/float``), and whether §6.4's 40 dB holds (at tier ``none``;
  at ``entropy-consistency`` the symbols alone decide);
- for an integer capability, each integer path's RGB8 hash of every payload of the committed
  corpus made for the set, against the corpus;
- ``replicate`` (a decode that needs ``decode-equivalence``) asked of every float path: it
  must be refused, ``dispatch_tier_refused``, with nothing run.

A path that is absent here is listed with its adapter's reason; one §3 refuses for the set's
capability (an integer path for a float capability) with the code. Every decode goes through
:func:`dispatch.choose` with the decoder's own adapters, one path offered at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.payload import entropy_stage
from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.conformance import neural_conformance_dir
from wai_dispatch.dispatch import (
    CPU_ONNX_RUNTIME,
    Arithmetic,
    Capability,
    Code,
    DispatchPath,
    Tier,
    admit,
    choose,
)
from wai_dispatch.dispatch.errors import UnknownCapability, WaiError
from wai_dispatch.paths.registry import BUILDERS, absent_reason
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.decoding.prepare import Machine
from wai_dispatch.service.decoding.results import crop_to_picture, failure_text, rgb_digest, to_rgb8
from wai_dispatch.service.decoding.verify import (
    PSNR_BOUND_DB,
    corpora_for,
    expected_symbols_digest,
    psnr_rgb8,
)


@dataclass(frozen=True)
class SetEvidence:
    """One set's rows: one per path, in the decoder's offer order, then the others."""

    digest: str
    capability: str
    symbols_digest: str | None  # the payload's, through the integer entropy stage
    reference_symbols_digest: str | None  # the CPU reference's (the set writer's record)
    paths: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None  # the set's payload does not decode at all

    @property
    def ok(self) -> bool:
        return self.problem is None and all(row.get("ok") is not False for row in self.paths)

    def to_json(self) -> dict[str, Any]:
        return {
            "set": self.digest,
            "capability": self.capability,
            "symbols_digest": self.symbols_digest,
            "reference_symbols_digest": self.reference_symbols_digest,
            "symbols_equal": self.symbols_digest == self.reference_symbols_digest,
            "problem": self.problem,
            "ok": self.ok,
            "paths": self.paths,
        }


@dataclass(frozen=True)
class Evidence:
    """Every set's evidence (``wai-dispatch evidence --json``)."""

    sets: list[SetEvidence]

    @property
    def ok(self) -> bool:
        return bool(self.sets) and all(s.ok for s in self.sets)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "wai-dispatch-evidence/1",
            "bound_db": PSNR_BOUND_DB,
            "ok": self.ok,
            "sets": [s.to_json() for s in self.sets],
        }


def set_evidence(machine: Machine, files: LoadedSet) -> SetEvidence:
    capability = machine.capabilities.get(files.capability)
    payload_name = files.facts.payload_file
    if capability is None or payload_name is None or not files.has(payload_name):
        why = (
            f"{UnknownCapability.code}: this build does not know it"
            if capability is None
            else "it carries no payload"
        )
        return SetEvidence(files.digest, files.capability, None, None, problem=f"the set: {why}")
    try:
        reference_digest = expected_symbols_digest(files)
        payload = files.read(payload_name)
        hyper = HyperStage.of(files)
        if hyper is not None:
            stage = hyper.run(payload, limits=machine.limits, engine=machine.engine)
        else:
            stage = entropy_stage(payload, tables_of(files), limits=machine.limits)
    except (ValueError, KeyError, RecursionError, WaiError) as exc:
        problem = f"the set's payload does not decode: {failure_text(exc)}"
        return SetEvidence(files.digest, files.capability, None, None, problem=problem)
    out = SetEvidence(files.digest, files.capability, stage.symbols_digest, reference_digest)
    job = machine.job(files, stage.latent, stage.symbols)
    needed = capability.registered_tier
    reference: np.ndarray | None = None
    if capability.networks is Arithmetic.FLOAT:
        ref = choose(capability, needed, (CPU_ONNX_RUNTIME,), machine.adapters, job)
        if ref.output is not None:
            reference = crop_to_picture(to_rgb8(ref.output), payload)
    offered = list(machine.offer)
    for path in offered + sorted((p for p in BUILDERS if p not in offered), key=str):
        row: dict[str, Any] = {"path": str(path), "offered": path in machine.offer}
        out.paths.append(row)
        adapter = machine.adapters.get(path)
        if adapter is None or not adapter.unit_present():
            row.update(present=False, reason=absent_reason(adapter))
            continue
        row["present"] = True
        if _refused(row, capability, path, adapter, job):
            continue
        decision = choose(capability, needed, (path,), {path: adapter}, job)
        if decision.report.ran is None:
            code = decision.report.refused[0].reason
            error = decision.failures.get(path)
            reason = failure_text(error) if error is not None else code.meaning
            row.update(ran=False, code=str(code), reason=reason)
            row["ok"] = False if code is Code.BACKEND_FAILED else None
            continue
        ran = decision.report.ran
        rgb = crop_to_picture(to_rgb8(decision.output), payload)
        row.update(ran=True, **_ran_figures(ran.to_json()))
        row["rgb8_blake3"] = rgb_digest(rgb)
        row["symbols_equal"] = stage.symbols_digest == reference_digest
        if reference is not None:
            row.update(_against(rgb, reference, needed))
        if path.arithmetic is Arithmetic.INTEGER:
            row["corpus"] = _corpus(machine, files, path, adapter)
        row["ok"] = _ok(row)
    return out


def _refused(
    row: dict[str, Any], capability: Capability, path: DispatchPath, adapter: Any, job: Any
) -> bool:
    """Into ``row``: a float path's answer to ``replicate`` (refused with nothing run), and
    whether §3 refuses ``path`` for the capability at its tier (then nothing runs on it)."""
    if path.arithmetic is Arithmetic.FLOAT:
        asked = choose(capability, Tier.DECODE_EQUIVALENCE, (path,), {path: adapter}, job)
        refusal = asked.report.refused[0].reason if asked.report.refused else None
        row["replicate"] = None if refusal is None else str(refusal)
    refused = admit(path, capability.registered_tier, capability)
    if refused is None:
        return False
    row.update(ran=False, code=str(refused), reason=refused.meaning)
    if "replicate" in row:  # a float path: what it must refuse, it refuses
        row["ok"] = row["replicate"] == str(Code.TIER_REFUSED)
    return True


def _ran_figures(ran: dict[str, Any]) -> dict[str, Any]:
    return {"unit": ran["unit"], "tier": ran["tier"], "placement": ran["placement"]}


def _against(rgb: np.ndarray, reference: np.ndarray, needed: Tier) -> dict[str, Any]:
    """PSNR, samples differing and the largest difference against the CPU reference."""
    if rgb.shape != reference.shape:
        return {"psnr_db": None, "reason": f"picture {rgb.shape} vs reference {reference.shape}"}
    diff = np.abs(rgb.astype(np.int16) - reference.astype(np.int16))
    db = psnr_rgb8(rgb, reference)
    return {
        "psnr_db": None if math.isinf(db) else round(db, 2),
        "identical": math.isinf(db),
        "samples_differing": int(np.count_nonzero(diff)),
        "samples": int(diff.size),
        "max_difference": int(diff.max(initial=0)),
        "bound_holds": (db >= PSNR_BOUND_DB) if needed is Tier.NONE else None,
    }


def _corpus(
    machine: Machine, files: LoadedSet, path: DispatchPath, adapter: Any
) -> list[dict[str, Any]]:
    """Every corpus payload made for this set, decoded on ``path``, its RGB8 hash against the
    corpus's (decode-equivalence: the same bytes on every machine)."""
    capability = machine.capabilities.get(files.capability)
    assert capability is not None
    tables = tables_of(files)
    rows: list[dict[str, Any]] = []
    for folder, doc in corpora_for(files.digest, [neural_conformance_dir()]):
        for case in doc["payloads"]:
            row: dict[str, Any] = {"payload": case["name"], "expected": case["rgb8_blake3"]}
            rows.append(row)
            try:
                body = (folder / case["payload"]).read_bytes()
                stage = entropy_stage(body, tables, limits=machine.limits)
            except (OSError, WaiError) as exc:
                row.update(got=None, ok=False, reason=failure_text(exc))
                continue
            job = machine.job(files, stage.latent, stage.symbols)
            decision = choose(capability, Tier.DECODE_EQUIVALENCE, (path,), {path: adapter}, job)
            if decision.report.ran is None:
                row.update(got=None, ok=False, reason=str(decision.report.refused[0].reason))
                continue
            got = rgb_digest(crop_to_picture(to_rgb8(decision.output), body))
            symbols_ok = codec_payload.symbols_digest(stage.symbols) == case["symbols_digest"]
            row.update(got=got, ok=got == case["rgb8_blake3"] and symbols_ok)
    return rows


def _ok(row: dict[str, Any]) -> bool:
    if not row["symbols_equal"]:
        return False
    if row.get("replicate", str(Code.TIER_REFUSED)) != str(Code.TIER_REFUSED):
        return False
    if row.get("bound_holds") is False:
        return False
    return all(c["ok"] for c in row.get("corpus", []))
