"""``wai-dispatch decode`` and ``wai-dispatch demo``: decode envelopes through the dispatch
rules and print the ``wai-neural-dispatch/1`` report of every decode tried."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from wai_dispatch.cli.context import decoder, read_envelope
from wai_dispatch.cli.options import add_data_dir, add_offer, setting_flags, settings
from wai_dispatch.cli.remote import decode_remote
from wai_dispatch.codec.envelope_read import parse
from wai_dispatch.codec.files import check_output, make_folder, write_atomic
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.dispatch import Code, Report
from wai_dispatch.service.decoding import estimate
from wai_dispatch.service.decoding.results import NoPath

if TYPE_CHECKING:
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.decoding.settings import Settings

NO_LIMITS = "--no-limits"


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("decode", help="decode an envelope (JSON or CBOR) to a PNG")
    p.add_argument("envelope", type=FsPath, help="envelope file, JSON or CBOR")
    p.add_argument("-o", "--output", type=FsPath, help="PNG to write")
    p.add_argument("--url", help="post to the service at URL instead of decoding here")
    p.add_argument("--token", help="bearer token for --url (default: WAI_TOKEN, WAI_TOKEN_FILE)")
    setting_flags(p, "token")
    p.add_argument("--retries", type=int, default=5, help="retries of a 429 for --url")
    _common(p)
    p.set_defaults(func=run_decode)

    d = sub.add_parser("demo", help="decode the bundled sample envelopes with the bundled sets")
    d.add_argument("-o", "--out-dir", type=FsPath, default=FsPath("out"))
    _common(d)
    d.set_defaults(func=run_demo)


def _common(p: argparse.ArgumentParser) -> None:
    add_offer(p)
    add_data_dir(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        NO_LIMITS,
        action="store_true",
        help="decode even when the time or memory estimate is over the service's limits "
        "(max_latent_elements, memory_budget_bytes, decode_timeout_s)",
    )


def decode_file(
    ctx: Decoder, envelope_path: FsPath, limits: Settings | None = None
) -> dict[str, Any]:
    """Decode one envelope file; the result as JSON-able data (PNG bytes under ``png``).
    With ``limits``, a decode whose estimate from its payload headers is over them (the
    service's admission: :func:`service.decoding.estimate.check`) is refused before it runs,
    naming the limit and ``--no-limits``."""

    prepared = ctx.prepare(parse(read_envelope(envelope_path), limits=ctx.limits))
    if limits is not None:
        estimate.check(
            estimate.estimate(prepared),
            max_latent_elements=limits.max_latent_elements,
            memory_budget_bytes=limits.memory_budget_bytes,
            decode_timeout_s=limits.decode_timeout_s,
            lifted_by=NO_LIMITS,
        )
    try:
        result = ctx.decode(prepared)
    except NoPath as exc:
        return {
            "envelope": str(envelope_path),
            "decoded": False,
            "error": exc.to_json(),
            "reports": [r.to_json() for r in exc.reports],
            "undecodable": [u.to_json() for u in exc.undecodable],
            "symbols_digest": exc.parts[-1].symbols_digest if exc.parts else None,
        }
    return {
        "envelope": str(envelope_path),
        "decoded": True,
        "reports": [r.to_json() for r in result.reports],
        "undecodable": [u.to_json() for u in result.undecodable],
        "set": result.set_digest,
        "symbols_digest": result.symbols_digest,
        "picture": {"width": result.width, "height": result.height},
        "rgb_digest": result.rgb_digest,
        "png": result.png(),
    }


def run_decode(args: argparse.Namespace) -> int:
    if args.output is not None:  # refused before the decode: nothing is done for nothing
        check_output(args.output, inputs=[args.envelope])
    ctx = decoder(args)
    if args.url:
        token = settings(args).bearer()
        outcome = decode_remote(args.url, args.envelope, token, args.retries)
    else:
        outcome = decode_file(ctx, args.envelope, _limits(args))
    png = outcome.pop("png", None)
    if png is not None and args.output is not None:
        write_atomic(args.output, png, inputs=[args.envelope])
        outcome["output"] = str(args.output)
    _print(ctx, [outcome], as_json=args.json)
    return 0 if outcome["decoded"] else 1


def run_demo(args: argparse.Namespace) -> int:
    make_folder(args.out_dir)
    ctx = decoder(args)
    outcomes = []
    samples = [p for p in envelopes_dir().iterdir() if p.suffix in (".json", ".cbor")]
    # The samples that decode first (JSON, then CBOR), then those that show a refusal.
    order = sorted(samples, key=lambda p: ("replicate" in p.stem, p.suffix != ".json", p.name))
    for path in order:
        outcome = decode_file(ctx, path, _limits(args))
        png = outcome.pop("png", None)
        if png is not None:
            suffix = "" if path.suffix == ".json" else "-from-cbor"
            target = args.out_dir / f"{path.stem}{suffix}.png"
            write_atomic(target, png, inputs=[path])
            outcome["output"] = str(target)
        outcomes.append(outcome)
    _print(ctx, outcomes, as_json=args.json)
    return 0


def _limits(args: argparse.Namespace) -> Settings | None:
    """The limits a local decode is held to: the service's (its settings), unless
    ``--no-limits``."""
    return None if args.no_limits else settings(args)


def _print(ctx: Decoder, outcomes: list[dict[str, Any]], *, as_json: bool) -> None:
    if as_json:
        json.dump(outcomes if len(outcomes) > 1 else outcomes[0], sys.stdout, indent=2)
        print()
        return
    for outcome in outcomes:
        shown = os.path.relpath(outcome["envelope"])
        print(shown if not shown.startswith("..") else outcome["envelope"])
        for skipped in outcome.get("undecodable", []):
            print(f"  {skipped['capability']}: not decodable here: {skipped['code']}")
        for report_json in outcome["reports"]:
            print(_describe(ctx, Report.from_json(report_json)))
        if outcome["decoded"]:
            pic = outcome["picture"]
            where = f" → {outcome['output']}" if "output" in outcome else ""
            print(f"  picture  {pic['width']}×{pic['height']} RGB8{where}")
        else:
            error = outcome["error"]
            what = "no path" if error["code"] == "decode_no_path" else error["code"]
            print(f"  {what}  {error['message']}")
        if outcome.get("symbols_digest"):
            print(f"  symbols  blake3 {outcome['symbols_digest']}")
        print()


def _describe(ctx: Decoder, report: Report) -> str:
    lines = [f"  {report.capability}: needs {report.needed}"]
    for refusal in report.refused:  # in the order offered (§5), before the path that ran
        why = refusal.reason.meaning
        if refusal.reason is Code.UNIT_ABSENT:
            why = ctx.absent_reason(refusal.path)
        lines.append(f"    refused  {refusal.path!s:26} {refusal.reason}: {why}")
    if report.ran is None:
        lines.append("    ran      none")
    else:
        placement = report.ran.placement
        where = (
            "none stated"
            if placement is None
            else " ".join(f"{unit}={n}" for unit, n in placement.to_json().items() if n)
        )
        lines.append(
            f"    ran      {report.ran.path!s:26} tier {report.ran.tier}, placement {where}"
        )
    return "\n".join(lines)
