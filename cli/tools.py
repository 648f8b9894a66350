"""``wai-dispatch import-compressai`` (CompressAI's own bitstream → an envelope) and
``wai-dispatch make-set`` (the set writers of ``tools/``, which need the tools extra)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path as FsPath

from wai_dispatch.codec.errors import CodecError


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "import-compressai",
        help="turn what CompressAI's net.compress() produced into an envelope for a set",
    )
    p.add_argument("input", type=FsPath, help="a compressai-compress/1 file (docs/interop.md)")
    p.add_argument(
        "--set",
        dest="set_digest",
        help="digest (or prefix) of the matching set "
        "(default: the store's default set of the capability)",
    )
    p.add_argument("--capability", default="wai.neural.bmshj2018")
    p.add_argument(
        "-o",
        "--output",
        type=FsPath,
        required=True,
        help="envelope to write; .cbor for the binary form, else JSON",
    )
    p.add_argument("--data-dir", type=FsPath, help="where the set store lives (WAI_DATA_DIR)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_import)

    m = sub.add_parser("make-set", help="write a parameter set (needs the tools extra)")
    m.add_argument("kind", choices=["bmshj2018"])
    m.add_argument("rest", nargs=argparse.REMAINDER, help="the writer's own options (--out …)")
    m.set_defaults(func=run_make_set)


def import_compressai(data: bytes, set_files: object) -> tuple[bytes, str, tuple[int, ...]]:
    """Our payload for CompressAI's bitstream, its symbols digest and the latent shape."""
    from wai_dispatch.codec import payload
    from wai_dispatch.codec.compressai_rans import decode_string, load_compressed
    from wai_dispatch.codec.tables import EntropyTables

    string, (height, width), _ = load_compressed(data)
    facts = set_files.facts  # type: ignore[attr-defined]
    tables = EntropyTables.from_json(set_files.read(facts["tables"]))  # type: ignore[attr-defined]
    symbols = decode_string(string, tables, (tables.channels, height, width))[None]
    return payload.encode(symbols, tables), payload.symbols_digest(symbols), symbols.shape


def run_import(args: argparse.Namespace) -> int:
    from wai_dispatch.codec.config import sets_dir
    from wai_dispatch.codec.envelope import Envelope
    from wai_dispatch.codec.sets import SetStore, ensure_bundled

    store = SetStore(sets_dir(args.data_dir))
    ensure_bundled(store)
    digest = (
        store.resolve(args.set_digest)
        if args.set_digest
        else store.default_for(args.capability).digest
    )
    set_files = store.open(digest)
    try:
        data = args.input.read_bytes()
    except OSError as exc:
        raise CodecError(
            f"cannot read {args.input}: {exc.strerror}", code="file_unreadable"
        ) from None
    body, digest_hex, shape = import_compressai(data, set_files)
    envelope = Envelope(capability=set_files.capability, payload=body, set=digest)
    cbor = args.output.suffix == ".cbor"
    args.output.write_bytes(envelope.to_cbor() if cbor else envelope.to_json())
    summary = {
        "envelope": str(args.output),
        "set": digest,
        "capability": envelope.capability,
        "latent_shape": list(shape),
        "symbols_digest": digest_hex,
        "payload_bytes": len(body),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"wrote {args.output}: {envelope.capability}, latent {'×'.join(map(str, shape))}, "
            f"{len(body)} payload bytes, symbols blake3 {digest_hex[:16]}…"
        )
    return 0


def run_make_set(args: argparse.Namespace) -> int:
    try:
        from wai_dispatch.tools import wai_bmshj2018_npu_set as writer
    except ImportError as exc:
        raise CodecError(
            f"make-set needs the tools extra (`make tools`): {exc}", code="tools_missing"
        ) from None
    status: int = writer.main(args.rest)
    sys.stdout.flush()
    return status
