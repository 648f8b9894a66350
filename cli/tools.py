"""``wai-dispatch import-compressai`` (CompressAI's own bitstream → an envelope) and
``wai-dispatch make-set`` (the set writers of ``tools/``, which need the tools extra)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path as FsPath
from typing import Protocol

from wai_dispatch.cli.context import decoder
from wai_dispatch.cli.main import Parser
from wai_dispatch.cli.options import add_data_dir
from wai_dispatch.codec.errors import CodecError, Limits
from wai_dispatch.codec.files import check_output, read_regular, write_atomic
from wai_dispatch.dispatch.codes import ErrorCode


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "import-compressai",
        help="turn what CompressAI's net.compress() produced into an envelope for a set",
    )
    p.add_argument("input", type=FsPath, help="a compressai-compress/1 file (docs/interop.md)")
    p.add_argument(
        "--set",
        dest="set_digest",
        help="digest (or prefix) of the matching set (default: the installed set whose model "
        "and quality are the file's; yours before a bundled one)",
    )
    p.add_argument(
        "--capability",
        default=None,
        help="the capability (default: the one of the file's model, wai.neural.bmshj2018)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=FsPath,
        required=True,
        help="envelope to write; .cbor for the binary form, else JSON",
    )
    add_data_dir(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_import)

    m = sub.add_parser("make-set", help="write a parameter set (needs the tools extra)")
    m.add_argument(
        "kind",
        choices=["bmshj2018", "int-synth"],
        help="bmshj2018: a float set from a CompressAI checkpoint; int-synth: an integer set "
        "derived from a float set (--from DIGEST)",
    )
    m.add_argument("rest", nargs=argparse.REMAINDER, help="the writer's own options (--out …)")
    m.set_defaults(func=run_make_set)


def run_import(args: argparse.Namespace) -> int:
    check_output(args.output, inputs=[args.input])
    data = read_regular(args.input, limit=Limits().max_envelope_bytes, what="CompressAI file")
    result = decoder(args).import_compressai(
        data, set_digest=args.set_digest, capability=args.capability
    )
    envelope = result.envelope
    cbor = args.output.suffix == ".cbor"
    write_atomic(
        args.output, envelope.to_cbor() if cbor else envelope.to_json(), inputs=[args.input]
    )
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
        print(json.dumps(summary))
    else:
        print(
            f"wrote {args.output}: {result.capability}, latent {'×'.join(map(str, shape))}, "
            f"{result.payload_bytes} payload bytes, symbols blake3 {result.symbols_digest[:16]}…, "
            f"set {result.set_name} {result.set_digest[:16]}… ({result.chosen})"
        )
    return 0


class _SetWriter(Protocol):
    """A set writer module of the tools (``wai_int_synth_set``, ``wai_bmshj2018_npu_set``)."""

    def build_parser(
        self, prog: str, parser_class: type[argparse.ArgumentParser]
    ) -> argparse.ArgumentParser: ...

    def run(self, args: argparse.Namespace) -> FsPath: ...


def run_make_set(args: argparse.Namespace) -> int:
    writer: _SetWriter
    try:  # the set writer is loaded when make-set runs: it needs the tools extra (torch)
        if args.kind == "int-synth":
            from wai_dispatch.tools import wai_int_synth_set as writer
        else:
            from wai_dispatch.tools import wai_bmshj2018_npu_set as writer
    except ImportError as exc:
        raise CodecError(
            f"make-set needs the tools extra (`make tools`): {exc}", code=ErrorCode.TOOLS_MISSING
        ) from None

    prog = f"wai-dispatch make-set {args.kind}"
    options = writer.build_parser(prog, Parser).parse_args(args.rest)
    out = writer.run(options)  # SetWriterError is a typed error: one line, exit 2
    sys.stdout.flush()
    print(f"wrote {out}")
    return 0
