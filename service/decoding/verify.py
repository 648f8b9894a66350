"""§6.4 agreement on the sets of a decoder's store (``wai-dispatch verify``):

1. The symbols of the set's payload are the reference decode's: their digest is the one the
   set writer recorded (``payload.json``).
2. Every float path that can run here reconstructs RGB8 within 40 dB PSNR of the reference
   sink's decode on the CPU (ONNX Runtime).

A set of a capability registered at entropy-consistency (``wai.neural.bmshj2018_hyperprior``)
is checked by its symbols digest alone (§6.4); the 40 dB bound is for tier none only.

An integer set (``wai.neural.int_synth``) is held to more (:func:`verify_integer_set`): its
wai-ops/1 program loads whole (format, weights, the bound rule), the set's payload decodes on
``cpu/wai-ops/integer``, and every payload of a conformance corpus made for this set decodes to
the corpus's RGB8 hash exactly — the agreement decode-equivalence promises (§6.4, §8).

A damaged set, and a set of a capability this build does not know, is reported; the others
are checked all the same."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.payload import entropy_stage
from wai_dispatch.codec.sets import SetError
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.conformance import neural_conformance_dir
from wai_dispatch.dispatch import (
    CPU_ONNX_RUNTIME,
    Adapter,
    Arithmetic,
    Capability,
    Code,
    DispatchPath,
    Tier,
    admit,
    choose,
    strictjson,
)
from wai_dispatch.dispatch.errors import UnknownCapability, WaiError
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter
from wai_dispatch.paths.waiops import choose as engines
from wai_dispatch.paths.waiops.adapter import CPU_WAI_OPS_NAME, load_set_program
from wai_dispatch.service.decoding.errors import SetPayloadInfoInvalid
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.decoding.prepare import Machine, OpenedSets
from wai_dispatch.service.decoding.results import SetCheck, VerifyResult, rgb_digest, to_rgb8
from wai_dispatch.setfacts.limits import Limits

#: §6.4's bound for a float path at tier `none`: PSNR of RGB8 against the CPU reference.
PSNR_BOUND_DB = 40.0


def psnr_rgb8(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two RGB8 pictures (peak 255); ``inf`` when they are equal."""

    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(255.0**2 / mse)


def verify_store(
    sets: OpenedSets, machine: Machine, on_set: Callable[[int, int, str], None] | None = None
) -> VerifyResult:
    """Every installed set of ``sets``' store checked on ``machine`` (a decoder's);
    ``on_set(done, total, name)`` is told before each set (the CLI's progress)."""
    store = sets.store
    results: list[SetCheck] = []
    for digest, problem in sorted(store.damaged().items()):
        results.append(SetCheck(digest, "?", damaged=[problem.to_json()]))
    installed_sets = store.list()
    for done, installed in enumerate(installed_sets):
        if on_set is not None:
            on_set(done, len(installed_sets), installed.name)
        results.append(verify_set(sets, machine, installed.digest, installed.name))
    return VerifyResult(results)


def expected_symbols_digest(set_files: Any) -> str:
    """The symbols digest the set writer recorded for the set's payload (``payload_info``,
    default ``payload.json``); ``set_payload_info_invalid`` when it does not read."""
    name = set_files.facts.payload_info_file
    where = f"set {set_files.digest[:16]}…: payload_info {name[:80]!r}"
    if not set_files.has(name):
        raise SetPayloadInfoInvalid(f"{where} is not a file of the set")
    try:
        info = strictjson.loads(set_files.read(name).decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        why = " ".join(str(exc).split())[:120]
        raise SetPayloadInfoInvalid(f"{where} is not JSON ({why})") from None
    digest = info.get("symbols_digest") if isinstance(info, dict) else None
    if not isinstance(digest, str):
        raise SetPayloadInfoInvalid(
            f"{where} states no symbols_digest (a text member)",
        )
    return digest


def verify_set(sets: OpenedSets, machine: Machine, digest: str, name: str) -> SetCheck:
    try:
        set_files = sets.loaded(digest)
    except SetError:
        problems = [p.to_json() for p in sets.store.verify(digest).problems]
        return SetCheck(digest, name, damaged=problems or [{"file": "?", "code": "set_invalid"}])
    capability = machine.capabilities.get(set_files.capability)
    if capability is None:
        return SetCheck(
            digest,
            name,
            skipped=(
                f"{UnknownCapability.code}: this build does not know capability "
                f"{set_files.capability}"
            ),
        )
    payload_name = set_files.facts.payload_file
    if payload_name is None or not set_files.has(payload_name):
        return SetCheck(digest, name, skipped="the set carries no payload")
    checks: list[dict[str, Any]] = []
    try:
        expected = expected_symbols_digest(set_files)
        hyper = HyperStage.of(set_files)
        payload = set_files.read(payload_name)
        stage = (
            hyper.run(payload, limits=machine.limits, engine=machine.engine)
            if hyper is not None
            else entropy_stage(payload, tables_of(set_files), limits=machine.limits)
        )
    except (ValueError, KeyError, RecursionError, WaiError) as exc:
        code = getattr(exc, "code", "set_invalid")
        message = " ".join(str(exc).split())[:200]
        failed = {"check": "payload", "ok": False, "reason": f"{code}: {message}"}
        return SetCheck(digest, name, checks=[failed])
    checks.append(
        {
            "check": "symbols_digest",
            "expected": expected,
            "got": stage.symbols_digest,
            "ok": stage.symbols_digest == expected,
        }
    )
    if capability.networks is Arithmetic.INTEGER:
        tables = tables_of(set_files)
        corpora = [neural_conformance_dir()]
        checks += verify_integer_set(set_files, tables, corpora, waiops_engine=machine.engine)
        return SetCheck(digest, name, checks=checks)
    if capability.registered_tier is Tier.ENTROPY_CONSISTENCY:
        # §6.4 at entropy-consistency: the symbols digest alone decides; the 40 dB bound is
        # an implementation check at tier none only.
        return SetCheck(digest, name, checks=checks)
    made = machine.job(set_files, stage.latent, stage.symbols)
    checks += _psnr_checks(capability, machine.adapters, made)
    return SetCheck(digest, name, checks=checks)


def _psnr_checks(
    capability: Capability, adapters: Mapping[DispatchPath, Adapter], job: SynthesisJob
) -> list[dict[str, Any]]:
    """§6.4 for a float capability at tier none: every float path that runs here within
    :data:`PSNR_BOUND_DB` of the CPU reference's RGB8 (the reference refused: one failed row)."""
    needed = capability.registered_tier
    reference_adapter = adapters.get(CPU_ONNX_RUNTIME)
    ref = choose(capability, needed, (CPU_ONNX_RUNTIME,), adapters, job)
    if ref.report.ran is None:
        reason = str(ref.report.refused[0].reason)
        return [
            {"check": "reference", "path": str(CPU_ONNX_RUNTIME), "ok": False, "reason": reason}
        ]
    reference = to_rgb8(ref.output)
    candidates = [(str(path), path, adapter) for path, adapter in adapters.items()]
    # Our ONNX Runtime path runs a rewritten graph (docs/onnx-path.md); the program exactly as
    # the set ships it is checked against the same bound.
    as_exported = OnnxRuntimeAdapter(rewrite=False)
    candidates.append((f"{CPU_ONNX_RUNTIME} (as exported)", CPU_ONNX_RUNTIME, as_exported))
    checks: list[dict[str, Any]] = []
    for label, path, adapter in candidates:
        if path.arithmetic is not Arithmetic.FLOAT or admit(path, needed, capability):
            continue
        decision = choose(capability, needed, (path,), {path: adapter}, job)
        row: dict[str, Any] = {"check": "psnr", "path": label}
        if decision.report.ran is None:
            code = decision.report.refused[0].reason
            row.update(ok=None, reason=str(code))  # cannot run here: nothing to compare
            if code is Code.BACKEND_FAILED:
                row["ok"] = False  # a path that is here but fails the decode is a failure
            checks.append(row)
            continue
        db = psnr_rgb8(to_rgb8(decision.output), reference)
        # JSON has no infinity: identical pictures are reported as such, with psnr_db null.
        row.update(
            psnr_db=None if math.isinf(db) else db,
            identical=math.isinf(db),
            bound_db=PSNR_BOUND_DB,
            ok=db >= PSNR_BOUND_DB,
            reference=adapter is reference_adapter,
        )
        checks.append(row)
    return checks


def corpora_for(digest: str, folders: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """The corpora (``corpus.json`` folders) that name this set."""
    found = []
    for folder in folders:
        doc_path = folder / "corpus.json"
        if doc_path.is_file():
            doc = strictjson.loads(doc_path.read_bytes())
            if doc.get("set") == digest:
                found.append((folder, doc))
    return found


def verify_integer_set(
    set_files: SetFiles,
    tables: Any,
    corpora: Iterable[Path],
    waiops_engine: str = "auto",
) -> list[dict[str, Any]]:
    """One row per check: ``check``, ``ok`` and what was compared; the corpus runs on the
    engine ``waiops_engine`` asks for (the verifying decoder's)."""

    rows: list[dict[str, Any]] = []
    try:
        program = load_set_program(set_files)
    except WaiError as exc:
        return [{"check": "program", "ok": False, "reason": f"{exc.code}: {exc.message}"}]
    rows.append(
        {
            "check": "program",
            "ok": True,
            "operations": program.operation_count,
            "largest": program.largest,
        }
    )
    engine = engines.build(program, CPU_WAI_OPS_NAME, waiops_engine)
    for folder, doc in corpora_for(set_files.digest, corpora):
        for case in doc["payloads"]:
            row: dict[str, Any] = {"check": "corpus", "payload": case["name"]}
            try:
                body = (folder / case["payload"]).read_bytes()
                symbols = codec_payload.decode(body, tables, limits=Limits())
                rgb = engine.run(symbols)[0].transpose(1, 2, 0).astype(np.uint8)
            except (OSError, WaiError) as exc:
                row.update(ok=False, reason=str(exc))
                rows.append(row)
                continue
            got = rgb_digest(rgb)
            row.update(
                expected=case["rgb8_blake3"],
                got=got,
                ok=got == case["rgb8_blake3"]
                and codec_payload.symbols_digest(symbols) == case["symbols_digest"],
            )
            rows.append(row)
    return rows
