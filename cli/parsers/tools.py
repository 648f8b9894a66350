"""The parsers of ``import-compressai`` and ``make-set`` (run by :mod:`cli.tools`). The set
writers' own options are declared in ``tools/set_writer_options.py`` (no torch), so that
``make-set KIND --help`` answers without the tools extra."""

from __future__ import annotations

import argparse
from pathlib import Path

from wai_dispatch.cli.flags import STDIO, Sub, add_data_dir, add_json, command, runs


def add(sub: Sub) -> None:
    p = command(
        sub,
        "import-compressai",
        "wai-dispatch import-compressai compressed.bin -o envelope.json\n"
        f"wai-dispatch import-compressai {STDIO} -o {STDIO} --set 3f9a < compressed.bin",
    )
    p.add_argument(
        "input",
        type=Path,
        help=f"a compressai-compress/1 file (docs/interop.md; {STDIO}: stdin)",
    )
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
        type=Path,
        required=True,
        help=f"envelope to write; .cbor for the binary form, else JSON ({STDIO}: JSON on stdout)",
    )
    add_data_dir(p)
    add_json(p)
    runs(p, "tools:run_import")

    m = command(
        sub,
        "make-set",
        "wai-dispatch make-set bmshj2018 --help\n"
        "wai-dispatch make-set bmshj2018 --out sets/bmshj2018-q3 --checkpoint q3.pth.tar\n"
        "wai-dispatch make-set int-synth --out sets/int-synth-q3 --from 3f9a\n"
        "wai-dispatch make-set bmshj2018-hyperprior --out sets/hp-q3 --checkpoint hp.pth.tar",
    )
    m.add_argument(
        "kind",
        choices=["bmshj2018", "int-synth", "bmshj2018-hyperprior"],
        help="bmshj2018: a float set from a CompressAI checkpoint; int-synth: an integer set "
        "derived from a float set (--from DIGEST); bmshj2018-hyperprior: a hyperprior set "
        "(integer hyper-synthesis) from a CompressAI ScaleHyperprior checkpoint",
    )
    m.add_argument(
        "rest", nargs=argparse.REMAINDER, help="the writer's own options (--out …; KIND --help)"
    )
    runs(m, "tools:run_make_set")
