"""``wai-dispatch import-compressai`` (CompressAI's own bitstream → an envelope) and
``wai-dispatch make-set`` (the set writers of ``tools/``, which need the tools extra)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Protocol

from wai_dispatch.cli import progress
from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.errors import ToolsMissing
from wai_dispatch.cli.flags import Parser, is_stdio
from wai_dispatch.cli.streams import check_target, read_input, write_output
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.set_writer_options import PARSERS


def run_import(args: argparse.Namespace) -> int:
    check_target(args.output, inputs=[args.input])
    data = read_input(args.input, limit=Limits().max_envelope_bytes, what="CompressAI file")
    result = decoder(args).import_compressai(
        data, set_digest=args.set_digest, capability=args.capability
    )
    envelope = result.envelope
    cbor = args.output.suffix == ".cbor"
    write_output(
        args.output, envelope.to_cbor() if cbor else envelope.to_json(), inputs=[args.input]
    )
    out = sys.stderr if is_stdio(args.output) else sys.stdout  # the envelope has stdout
    shape = result.latent_shape
    summary = {
        "envelope": str(args.output),
        "set": result.set_digest,
        "capability": result.capability,
        "latent_shape": list(shape),
        "symbols_digest": result.symbols_digest,
        "payload_bytes": result.payload_bytes,
        "set_chosen": result.chosen,
    }
    if args.json:
        print(json.dumps(summary), file=out)
    else:
        print(
            f"wrote {args.output}: {result.capability}, latent {'×'.join(map(str, shape))}, "
            f"{result.payload_bytes} payload bytes, symbols blake3 {result.symbols_digest[:16]}…, "
            f"set {result.set_name} {result.set_digest[:16]}… ({result.chosen})",
            file=out,
        )
    return 0


class _SetWriter(Protocol):
    """A set writer module of the tools (``wai_int_synth_set``, ``wai_bmshj2018_npu_set``)."""

    def run(self, args: argparse.Namespace) -> Path: ...


def run_make_set(args: argparse.Namespace) -> int:
    prog = f"wai-dispatch make-set {args.kind}"
    # the writer's options first, declared without torch: `make-set KIND --help` and a usage
    # error answer without the tools extra
    options = PARSERS[args.kind](prog, Parser).parse_args(args.rest)
    writer: _SetWriter
    try:  # the set writer is loaded when make-set runs: it needs the tools extra (torch)
        if args.kind == "int-synth":
            from wai_dispatch.tools import wai_int_synth_set as writer
        elif args.kind == "bmshj2018-hyperprior":
            from wai_dispatch.tools import wai_bmshj2018_hyperprior_set as writer
        else:
            from wai_dispatch.tools import wai_bmshj2018_npu_set as writer
    except ImportError as exc:
        raise ToolsMissing(f"make-set needs the tools extra (`make tools`): {exc}") from None

    with progress.spinner(f"make-set {args.kind}"):
        out = writer.run(options)  # SetWriterError is a typed error: one line, exit 2
    sys.stdout.flush()
    print(f"wrote {out}")
    return 0
