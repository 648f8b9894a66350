"""The parser of ``encode`` (run by :mod:`cli.encode`): a picture to an envelope for a set."""

from __future__ import annotations

from pathlib import Path

from wai_dispatch.cli.flags import STDIO, Sub, add_data_dir, add_json, command, runs

NO_LIMITS = "--no-limits"


def add(sub: Sub) -> None:
    p = command(
        sub,
        "encode",
        f"""
wai-dispatch encode picture.png -o envelope.json
wai-dispatch encode photo.jpg --set 3f9a --intent replicate -o envelope.cbor
cat pic.ppm | wai-dispatch encode {STDIO} --set 3f9a --checkpoint q3.pt -o {STDIO} > e.json""",
    )
    p.add_argument("picture", type=Path, help=f"a PNG, JPEG or PPM picture ({STDIO}: stdin)")
    p.add_argument(
        "--set",
        dest="set_digest",
        metavar="DIGEST",
        help="digest (or prefix) of the installed set to code for (default: the store's "
        "default set of --capability)",
    )
    p.add_argument(
        "--capability",
        default=None,
        help="without --set: the capability whose default set is used (wai.neural.bmshj2018)",
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        metavar="FILE",
        help="the checkpoint the set was written from (its analysis transform); its BLAKE3 must "
        "be the one the set's usage statement records (default: the bundled demo weights, for "
        "the sets written from them)",
    )
    p.add_argument(
        "--intent",
        choices=["replicate"],
        help="replicate: the decode must be decode-equivalent (an integer path, §2)",
    )
    p.add_argument(
        "--format",
        choices=["json", "cbor"],
        default=None,
        help="the envelope's form (default: cbor for an -o ending in .cbor, else json)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help=f"envelope to write ({STDIO}: stdout; the summary then goes to stderr)",
    )
    p.add_argument(
        NO_LIMITS,
        action="store_true",
        help="take a picture whose decode the service's limits (max_latent_elements, "
        "memory_budget_bytes, decode_timeout_s) would refuse; the codec's own limits still hold",
    )
    add_data_dir(p)
    add_json(p)
    runs(p, "encode:run_encode")
