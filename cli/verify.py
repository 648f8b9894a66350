"""``wai-dispatch verify``: §6.4 agreement on every installed set that carries a payload.

1. The symbols of the set's payload are the reference decode's: their digest is the one the
   set writer recorded (``payload.json``).
2. Every float path that can run here reconstructs RGB8 within 40 dB PSNR of the reference
   sink's decode on the CPU (ONNX Runtime).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path as FsPath
from typing import Any

import numpy as np

from wai_dispatch.dispatch import CPU_ONNX_RUNTIME, REGISTRY, Arithmetic, Code, admit, choose

#: §6.4's bound for a float path at tier `none`: PSNR of RGB8 against the CPU reference.
PSNR_BOUND_DB = 40.0


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("verify", help="§6.4 agreement of every path here on each set's payload")
    p.add_argument("--data-dir", type=FsPath, help="where the set store lives (WAI_DATA_DIR)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def psnr_rgb8(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two RGB8 pictures (peak 255); ``inf`` when they are equal."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(255.0**2 / mse)


def verify_set(store: Any, digest: str, adapters: Any) -> dict[str, Any]:
    from wai_dispatch.codec.errors import Limits
    from wai_dispatch.paths.job import SynthesisJob
    from wai_dispatch.service.pipeline import entropy_stage, to_rgb8

    set_files = store.open(digest)
    facts = set_files.facts
    capability = REGISTRY[set_files.capability]
    payload_name = facts.get("payload")
    out: dict[str, Any] = {"set": digest, "name": set_files.manifest.name, "checks": []}
    if not isinstance(payload_name, str) or not set_files.has(payload_name):
        out["skipped"] = "the set carries no payload"
        return out
    expected = json.loads(set_files.read(facts.get("payload_info", "payload.json")))
    _, digest_hex, latent = entropy_stage(set_files, set_files.read(payload_name), limits=Limits())
    out["checks"].append(
        {
            "check": "symbols_digest",
            "expected": expected["symbols_digest"],
            "got": digest_hex,
            "ok": digest_hex == expected["symbols_digest"],
        }
    )
    job = SynthesisJob(set_files, latent)
    needed = capability.registered_tier
    reference_adapter = adapters.get(CPU_ONNX_RUNTIME)
    ref = choose(capability, needed, (CPU_ONNX_RUNTIME,), adapters, job)
    if ref.report.ran is None:
        reason = ref.report.refused[0].reason
        out["checks"].append(
            {
                "check": "reference",
                "path": str(CPU_ONNX_RUNTIME),
                "ok": False,
                "reason": str(reason),
            }
        )
        return out
    reference = to_rgb8(ref.output)
    candidates = [(str(path), path, adapter) for path, adapter in adapters.items()]
    # Our ONNX Runtime path runs a rewritten graph (docs/onnx-path.md); the program exactly as
    # the set ships it is checked against the same bound.
    from wai_dispatch.paths.onnx import OnnxRuntimeAdapter

    candidates.append(
        (f"{CPU_ONNX_RUNTIME} (as exported)", CPU_ONNX_RUNTIME, OnnxRuntimeAdapter(rewrite=False))
    )
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
            out["checks"].append(row)
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
        out["checks"].append(row)
    return out


def run(args: argparse.Namespace) -> int:
    from wai_dispatch.codec.config import sets_dir
    from wai_dispatch.codec.sets import SetStore, ensure_bundled
    from wai_dispatch.paths.registry import known_adapters

    store = SetStore(sets_dir(args.data_dir))
    ensure_bundled(store)
    adapters = known_adapters()
    results = [verify_set(store, installed.digest, adapters) for installed in store.list()]
    ok = all(c["ok"] is not False for r in results for c in r["checks"]) and any(
        r["checks"] for r in results
    )
    if args.json:
        print(json.dumps({"ok": ok, "sets": results}, indent=2))
        return 0 if ok else 1
    for r in results:
        print(f"{r['name']}  {r['set'][:16]}…")
        if "skipped" in r:
            print(f"  skipped: {r['skipped']}")
        for c in r["checks"]:
            verdict = {True: "ok  ", False: "FAIL", None: "n/a "}[c["ok"]]
            if c["check"] == "symbols_digest":
                print(
                    f"  {verdict} symbols digest {c['got'][:16]}… (expected {c['expected'][:16]}…)"
                )
            elif c["check"] == "psnr" and "psnr_db" in c:
                db = "identical" if c["identical"] else f"{c['psnr_db']:.2f} dB"
                print(
                    f"  {verdict} {c['path']:40} {db} vs the CPU reference "
                    f"(bound {PSNR_BOUND_DB:g} dB)"
                )
            else:
                print(f"  {verdict} {c['path']:40} cannot run here: {c['reason']}")
    print("verify: ok" if ok else "verify: FAILED")
    return 0 if ok else 1
