"""``wai-dispatch paths`` (which offered paths this machine has, and why not) and
``wai-dispatch plan`` (a path's placement for a set, without decoding: §4's device questions
and the backend's plan, §5)."""

from __future__ import annotations

import argparse
import json

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.options import add_data_dir, add_offer
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch import NPU_MODEL_RUNTIME
from wai_dispatch.dispatch.codes import ErrorCode


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
    which.add_argument("--set-dir", metavar="DIR", help="a set directory")
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
    add_data_dir(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=run_plan)


# --- paths ------------------------------------------------------------------------------------


def run_paths(args: argparse.Namespace) -> int:
    ctx = decoder(args, bundled=False, ready=False)  # no set is opened: no store touched
    rows = ctx.paths()
    if args.json:
        offer = [str(r.path) for r in rows]
        print(json.dumps({"offer": offer, "paths": [r.to_json() for r in rows]}))
        return 0
    for row in rows:
        verdict = "present" if row.present else f"absent   {row.reason}"
        print(f"{row.path!s:28} {verdict}")
    return 0


# --- plan -------------------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    ctx = decoder(args)
    answer = ctx.plan(
        args.path,
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
        raise CodecError(
            f"--latent-shape {text[:80]!r} is not N,C,H,W", code=ErrorCode.INVALID_ARGUMENT
        ) from None
    if len(shape) != 4 or any(d < 1 for d in shape):
        raise CodecError(
            f"--latent-shape {text[:80]!r} is not four positive integers N,C,H,W",
            code=ErrorCode.INVALID_ARGUMENT,
        )
    return shape
