"""``wai-dispatch decode`` and ``wai-dispatch demo``: decode envelopes through the dispatch
rules and print the ``wai-neural-dispatch/1`` report of every decode tried. ``decode --url``
is :mod:`cli.remote`'s (``cli/main.py`` runs it there): no decoder is assembled and no data
directory touched, and the reports print as the service gave them."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK, is_stdio
from wai_dispatch.cli.options import settings
from wai_dispatch.cli.outcome_text import print_outcomes
from wai_dispatch.cli.parsers.decode import NO_LIMITS
from wai_dispatch.cli.streams import check_target, read_envelope, write_output
from wai_dispatch.codec.files import make_folder, write_atomic
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.dispatch import Code, DispatchPath
from wai_dispatch.paths.registry import absent_reason
from wai_dispatch.service.decoding.prepare import Estimate, check_estimate
from wai_dispatch.service.usecase.decode import NoPathFound, decode_here, local_request

if TYPE_CHECKING:
    from wai_dispatch.cli.outcome_text import Why
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.settings import Settings


def decode_file(
    ctx: Decoder, envelope_path: Path, limits: Settings | None = None
) -> dict[str, Any]:
    """Decode one envelope file through the decode use case (:func:`service.usecase.decode.
    decode_here`, as the service's route does); the result as JSON-able data (PNG bytes under
    ``png``). With ``limits``, a decode whose estimate from its payload headers is over them
    (the service's admission: :func:`service.decoding.prepare.check_estimate`) is refused before it
    runs, naming the limit and ``--no-limits``."""

    check = None if limits is None else functools.partial(_check, limits)
    outcome = decode_here(ctx, local_request(read_envelope(envelope_path)), check=check)
    if isinstance(outcome, NoPathFound):
        return {
            "envelope": str(envelope_path),
            "decoded": False,
            "error": outcome.error.to_json(),
            "reports": outcome.reports,
            "undecodable": [u.to_json() for u in outcome.error.undecodable],
            "symbols_digest": outcome.symbols_digest,
        }
    result = outcome.result
    return {
        "envelope": str(envelope_path),
        "decoded": True,
        "reports": outcome.reports,
        "undecodable": [u.to_json() for u in result.undecodable],
        "set": result.set_digest,
        "symbols_digest": result.symbols_digest,
        "picture": {"width": result.width, "height": result.height},
        "rgb_digest": result.rgb_digest,
        "png": outcome.picture,
    }


def _check(limits: Settings, est: Estimate) -> None:
    check_estimate(
        est,
        max_latent_elements=limits.max_latent_elements,
        memory_budget_bytes=limits.memory_budget_bytes,
        decode_timeout_s=limits.decode_timeout_s,
        lifted_by=NO_LIMITS,
    )


def run_decode(args: argparse.Namespace) -> int:
    if args.output is not None:  # refused before the decode: nothing is done for nothing
        check_target(args.output, inputs=[args.envelope])
    ctx = decoder(args)
    outcome = decode_file(ctx, args.envelope, _limits(args))
    png = outcome.pop("png", None)
    if png is not None and args.output is not None:
        write_output(args.output, png, inputs=[args.envelope])
        outcome["output"] = "(standard output)" if is_stdio(args.output) else str(args.output)
    # with the picture on stdout, what is said of it goes to stderr
    out = sys.stderr if is_stdio(args.output) else sys.stdout
    print_outcomes([outcome], as_json=args.json, out=out, why=_why(ctx))
    return EXIT_OK if outcome["decoded"] else EXIT_NO


def run_demo(args: argparse.Namespace) -> int:
    make_folder(args.out_dir)

    def say(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr)

    say("demo: opening the bundled sets (the first run installs and verifies them)…")
    ctx = decoder(args)
    outcomes = []
    samples = [p for p in envelopes_dir().iterdir() if p.suffix in (".json", ".cbor")]
    # The samples that decode first (JSON, then CBOR), then those that show a refusal.
    order = sorted(samples, key=lambda p: ("replicate" in p.stem, p.suffix != ".json", p.name))
    say(f"demo: decoding {len(order)} sample envelopes…")
    for path in order:
        outcome = decode_file(ctx, path, _limits(args))
        png = outcome.pop("png", None)
        if png is not None:
            suffix = "" if path.suffix == ".json" else "-from-cbor"
            target = args.out_dir / f"{path.stem}{suffix}.png"
            write_atomic(target, png, inputs=[path])
            outcome["output"] = str(target)
        outcomes.append(outcome)
    print_outcomes(outcomes, as_json=args.json, why=_why(ctx))
    return 0


def _limits(args: argparse.Namespace) -> Settings | None:
    """The limits a local decode is held to: the service's (its settings), unless
    ``--no-limits``."""
    return None if args.no_limits else settings(args)


def _why(ctx: Decoder) -> Why:
    """A refusal in words: §7's meaning, or for an absent unit its adapter's words here."""

    def why(refusal: dict[str, Any]) -> str:
        code = Code(refusal["reason"])
        if code is Code.UNIT_ABSENT:
            return absent_reason(ctx.adapters.get(DispatchPath.from_json(refusal)))
        return code.meaning

    return why
