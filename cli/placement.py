"""``wai-dispatch paths`` (every path this build knows, offered or not: present, or absent and
why, and its device) and ``wai-dispatch plan`` (a path's placement for a set, without decoding:
§4's device questions and the backend's plan, §5; by default the first present path)."""

from __future__ import annotations

import argparse
import json

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.errors import UsageError
from wai_dispatch.cli.flags import EXIT_NO
from wai_dispatch.dispatch.offer import parse_offer
from wai_dispatch.paths.registry import BUILDERS, PathStatus
from wai_dispatch.paths.waiops.choose import machine_engine

# --- paths ------------------------------------------------------------------------------------


def run_paths(args: argparse.Namespace) -> int:
    """Every path this build knows: the offer's first, in its order, then the others (marked
    not offered), each present or absent (and why), with the device it would run on."""
    ctx = decoder(args, bundled=False, ready=False)  # no set is opened: no store touched
    offer = list(ctx.offer)
    others = sorted((p for p in BUILDERS if p not in offer), key=str)
    rows = ctx.probe([*offer, *others])
    listed = [
        {**row.to_json(), "offered": row.path in offer, "device": _device(row, ctx.waiops_engine)}
        for row in rows
    ]
    if args.json:
        print(json.dumps({"offer": [str(p) for p in offer], "paths": listed}))
        return 0
    for row, obj in zip(rows, listed, strict=True):
        state = "present" if row.present else "absent"
        offered = f"offered {offer.index(row.path) + 1}" if obj["offered"] else "not offered"
        where = _device_text(obj["device"]) if row.present else str(row.reason)
        print(f"{row.path!s:26} {state:8} {offered:11}  {where}")
    return 0


def _device(row: PathStatus, waiops_engine: str = "auto") -> dict[str, object] | None:
    """Where a present path runs: its adapter's own account (the WebGPU adapter found), else
    its unit; ``None`` for an absent path. The wai-ops path's engine is the one this decoder's
    ``waiops_engine`` gets on this machine (each decoder's own, paths/waiops/choose.py)."""
    if not row.present:
        return None
    found = row.to_json().get("device")
    if not isinstance(found, dict):
        return {"unit": str(row.path.unit)}
    if "engine" in found:
        found = {**found, "engine": machine_engine(waiops_engine)}
    return dict(found)


def _device_text(device: object) -> str:
    if not isinstance(device, dict):
        return ""
    return "device " + ", ".join(f"{k} {v}" for k, v in device.items())[:70]


# --- plan -------------------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    # a path no backend can take is refused as in an offer (§1's table: invalid_offer)
    path = None if args.path is None else parse_offer([args.path])[0]
    ctx = decoder(args)
    if path is None:  # the first path of the offer this machine has
        present = [row.path for row in ctx.probe() if row.present]
        if not present:
            print("no path of the offer is present here (wai-dispatch paths says why)")
            return EXIT_NO
        path = present[0]
    answer = ctx.plan(
        path,
        set_digest=args.set,
        set_dir=args.set_dir,
        capability=args.capability,
        latent_shape=None if args.latent_shape is None else _shape(args.latent_shape),
    )
    if args.json:
        print(json.dumps(answer.to_json()))
        return 0 if answer.ok else 1
    shape = answer.latent_shape
    print(
        f"set {answer.set_digest[:16]}… ({answer.capability}), latent {'×'.join(map(str, shape))}"
    )
    if answer.code is not None:
        print(f"{answer.path!s:28} refused  {answer.code}: {answer.reason}")
    elif answer.placement is None:
        print(f"{answer.path!s:28} runs     the backend states no plan (§5)")
    else:
        counts = "  ".join(f"{k}={v}" for k, v in answer.placement.to_json().items())
        print(f"{answer.path!s:28} placed   {counts}")
    return 0 if answer.ok else 1


def _shape(text: str) -> tuple[int, ...]:
    """``N,C,H,W`` as integers (the limits are the decoder's to check)."""
    try:
        shape = tuple(int(d) for d in text.split(","))
    except ValueError:
        raise UsageError(f"--latent-shape {text[:80]!r} is not N,C,H,W") from None
    if len(shape) != 4 or any(d < 1 for d in shape):
        raise UsageError(
            f"--latent-shape {text[:80]!r} is not four positive integers N,C,H,W",
        )
    return shape
