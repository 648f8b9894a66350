"""``wai-dispatch encode``: a picture to an envelope for an installed set (docs/encode.md).
The encoder itself is :mod:`tools.encoder` (torch runs only inside a capability's encode
function, so a refusal before the analysis needs no tools extra). On a terminal, a progress bar
on standard error while the analysis runs (stage by stage and strip by strip, where the
capability's encoder reports it); none off a terminal or under ``--json``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from wai_dispatch.cli import progress
from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.flags import is_stdio
from wai_dispatch.cli.options import settings
from wai_dispatch.cli.streams import check_target, read_input, write_output
from wai_dispatch.codec.picture_read import PictureOverLimits
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.encoder import encode


def run_encode(args: argparse.Namespace) -> int:
    check_target(args.output, inputs=[args.picture])
    limit = Limits().max_payload_bytes  # a picture file larger than any payload we decode
    data = read_input(args.picture, limit=limit, what="picture", too_large=PictureOverLimits)
    with contextlib.ExitStack() as stack:
        shown = None if args.json else stack.enter_context(progress.bar("encode"))
        result = encode(
            decoder(args),
            data,
            set_digest=args.set_digest,
            capability=args.capability,
            checkpoint=args.checkpoint,
            intent=args.intent,
            settings=None if args.no_limits else settings(args),
            progress=None if shown is None or not shown.enabled else shown.update,
        )
    form = args.format or ("cbor" if args.output.suffix == ".cbor" else "json")
    envelope = result.envelope
    body = envelope.to_cbor() if form == "cbor" else envelope.to_json() + b"\n"
    write_output(args.output, body, inputs=[args.picture])
    out = sys.stderr if is_stdio(args.output) else sys.stdout  # the envelope has stdout
    summary = {"envelope": str(args.output), "format": form, **result.summary()}
    if args.json:
        print(json.dumps(summary), file=out)
        return 0
    for note in result.notes:
        print(f"wai-dispatch: warning: {note}", file=sys.stderr)
    width, height = result.picture_size
    coded_w, coded_h = result.coded_size
    padded = "" if (width, height) == (coded_w, coded_h) else f", padded to {coded_w}×{coded_h}"
    print(
        f"wrote {args.output} ({form}): {result.capability}, {width}×{height}{padded}, latent "
        f"{'×'.join(map(str, result.latent_shape))}, {result.payload_bytes} payload bytes "
        f"({result.bpp:.3f} bpp), symbols blake3 {result.symbols_digest[:16]}…, set "
        f"{result.set_name} {result.set_digest[:16]}…"
        + (f", intent {envelope.intent}" if envelope.intent else ""),
        file=out,
    )
    print(f"  checkpoint {result.checkpoint.path}: {result.checkpoint.note}", file=out)
    return 0
