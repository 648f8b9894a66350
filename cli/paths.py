"""``wai-dispatch paths`` (which offered paths this machine has, and why not) and
``wai-dispatch plan`` (a path's placement for a set, without decoding: §4's device questions
and the backend's plan, §5)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from wai_dispatch.cli.options import add_offer
from wai_dispatch.dispatch import (
    NPU_MODEL_RUNTIME,
    REGISTRY,
    Code,
    Path,
    Placement,
    admit,
    parse_offer,
)


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("paths", help="each offered path: present, or absent and why")
    add_offer(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_paths)

    q = sub.add_parser("plan", help="a path's placement for a set, without decoding (§5)")
    which = q.add_mutually_exclusive_group()
    which.add_argument(
        "--set",
        metavar="DIGEST",
        help="a set in the store, by digest or a prefix of one (default: the store's "
        "default set for --capability)",
    )
    which.add_argument("--set-dir", type=FsPath, metavar="DIR", help="a set directory")
    q.add_argument(
        "--path",
        default=str(NPU_MODEL_RUNTIME),
        metavar="UNIT/BACKEND/ARITH",
        help=f"the path to ask (default {NPU_MODEL_RUNTIME})",
    )
    q.add_argument(
        "--capability",
        default="wai.neural.bmshj2018",
        help="the capability whose default set --set falls back to",
    )
    q.add_argument(
        "--latent-shape",
        metavar="N,C,H,W",
        help="the latent to ask about (default: the program's fixed input, else the set's facts)",
    )
    q.add_argument("--data-dir", type=FsPath, help="where the set store lives (WAI_DATA_DIR)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_plan)


# --- paths ------------------------------------------------------------------------------------


def run_paths(args: argparse.Namespace) -> int:
    from wai_dispatch.paths import registry

    offer = parse_offer(args.offer) if args.offer else registry.default_offer()
    rows = registry.probe(offer)
    if args.json:
        print(json.dumps({"offer": [str(p) for p in offer], "paths": [r.to_json() for r in rows]}))
        return 0
    for row in rows:
        verdict = "present" if row.present else f"absent   {row.reason}"
        print(f"{row.path!s:28} {verdict}")
    return 0


# --- plan -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanAnswer:
    """What ``plan`` found: the placement, or the refusal code with a reason for a person."""

    placement: Placement | None = None
    code: Code | None = None
    reason: str | None = None


def run_plan(args: argparse.Namespace) -> int:
    path = Path.parse(args.path)
    set_files = _open_set(args)
    shape = _latent_shape(args, set_files, path)
    answer = ask(path, set_files, shape)
    summary: dict[str, Any] = {
        "set": set_files.digest,
        "capability": getattr(set_files, "capability", None),
        "path": path.to_json(),
        "latent_shape": list(shape),
        "placement": None if answer.placement is None else answer.placement.to_json(),
        "refused": None
        if answer.code is None
        else {"reason": str(answer.code), "message": answer.reason},
    }
    if args.json:
        print(json.dumps(summary))
    else:
        head = f"set {set_files.digest[:16]}…"
        if summary["capability"]:
            head += f" ({summary['capability']})"
        print(f"{head}, latent {'×'.join(map(str, shape))}")
        if answer.code is not None:
            print(f"{path!s:28} refused  {answer.code}: {answer.reason}")
        elif answer.placement is None:
            print(f"{path!s:28} runs     the backend states no plan (§5)")
        else:
            counts = "  ".join(f"{k}={v}" for k, v in answer.placement.to_json().items())
            print(f"{path!s:28} placed   {counts}")
    return 0 if answer.code is None else 1


def ask(path: Path, set_files: Any, shape: tuple[int, ...]) -> PlanAnswer:
    """§3 against the set's capability at its registered tier, then §4's device questions and
    the plan (§5), as :func:`dispatch.choose` asks them, without running the networks."""
    import numpy as np

    from wai_dispatch.paths import registry
    from wai_dispatch.paths.job import SynthesisJob

    capability = REGISTRY.get(getattr(set_files, "capability", "") or "")
    if capability is not None:
        code = admit(path, capability.registered_tier, capability)
        if code is not None:
            return PlanAnswer(code=code, reason=code.meaning)
    adapter = registry.known_adapters().get(path)
    if adapter is None:
        return PlanAnswer(code=Code.UNIT_ABSENT, reason=registry.NO_ADAPTER)
    job = SynthesisJob(set_files, np.zeros(shape, np.float32))
    try:
        if not adapter.unit_present():
            return PlanAnswer(code=Code.UNIT_ABSENT, reason=registry.absent_reason(adapter))
        if not adapter.program_present(job):
            return PlanAnswer(code=Code.PROGRAM_ABSENT, reason=Code.PROGRAM_ABSENT.meaning)
        if not adapter.takes_shape(job):
            return PlanAnswer(code=Code.SHAPE_MISMATCH, reason=Code.SHAPE_MISMATCH.meaning)
        placement = adapter.plan(job)
    except Exception as exc:  # as choose() does: any backend error refuses the path (§4)
        return PlanAnswer(code=Code.BACKEND_FAILED, reason=str(exc) or type(exc).__name__)
    if placement is not None and placement.on(path.unit) == 0:  # §5
        counts = " ".join(f"{k}={v}" for k, v in placement.to_json().items())
        return PlanAnswer(placement, Code.NOT_PLACED, f"{Code.NOT_PLACED.meaning} ({counts})")
    return PlanAnswer(placement)


def _open_set(args: argparse.Namespace) -> Any:
    from wai_dispatch.codec import sets

    if args.set_dir is not None:
        # A directory outside the store: its set.json names the digest its files are checked
        # against, as the store checks an installed set.
        directory: FsPath = args.set_dir
        try:
            manifest_bytes = (directory / sets.MANIFEST_NAME).read_bytes()
        except OSError as exc:
            raise sets.SetFileMissing(
                f"{directory / sets.MANIFEST_NAME}: cannot be read ({exc.strerror})"
            ) from None
        digest = sets.Manifest.from_bytes(manifest_bytes).digest
        return sets.load(directory, digest)
    from wai_dispatch.codec.config import sets_dir

    store = sets.SetStore(sets_dir(args.data_dir))
    sets.ensure_bundled(store)
    digest = store.resolve(args.set) if args.set else store.default_for(args.capability).digest
    return store.open(digest)


def _latent_shape(args: argparse.Namespace, set_files: Any, path: Path) -> tuple[int, ...]:
    """``--latent-shape``, else the program's fixed input (Core ML, §6.1), else a
    ``latent_shape`` the set's facts state."""
    from wai_dispatch.codec.errors import CodecError

    if args.latent_shape:
        try:
            return tuple(int(d) for d in args.latent_shape.split(","))
        except ValueError:
            raise CodecError(
                f"--latent-shape {args.latent_shape!r} is not N,C,H,W", code="invalid_argument"
            ) from None
    if path == NPU_MODEL_RUNTIME and _unit_present(path):
        # Reading the program's input needs coremltools (which pulls in torch): only worth it
        # where Core ML can run; elsewhere the path is refused before its shape is asked.
        from wai_dispatch.paths.coreml import program_shape

        try:
            shape = program_shape(set_files)
        except ValueError:
            shape = None  # the adapter says what is wrong with the program
        if shape is not None:
            return shape
    shape = _facts_shape(set_files.facts)
    if shape is None:
        raise CodecError(
            f"set {set_files.digest[:16]}… states no latent shape: give --latent-shape N,C,H,W",
            code="invalid_argument",
        )
    return shape


def _unit_present(path: Path) -> bool:
    from wai_dispatch.paths.registry import known_adapters

    adapter = known_adapters().get(path)
    return adapter is not None and adapter.unit_present()


def _facts_shape(facts: Mapping[str, Any]) -> tuple[int, ...] | None:
    candidates: list[Any] = [facts.get("latent_shape")]
    payload = facts.get("payload")
    if isinstance(payload, Mapping):
        candidates.append(payload.get("latent_shape"))
    programs = facts.get("programs")
    if isinstance(programs, Mapping):
        candidates += [p.get("latent_shape") for p in programs.values() if isinstance(p, Mapping)]
    for shape in candidates:
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
            return tuple(shape)
    return None
