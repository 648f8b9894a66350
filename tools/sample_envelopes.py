"""``python -m wai_dispatch.tools.sample_envelopes``: write the sample envelopes `wai-dispatch
demo` decodes, from each bundled set's payload (conformance/envelopes/, docs/decoding.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.conformance import envelopes_dir, sets_dir


def sample_envelopes(set_dir: Path) -> dict[str, bytes]:
    """File name → bytes: the set's payload as it decodes (JSON and CBOR forms), and the same
    payload sent with ``intent: replicate``, which §3 refuses on every float path."""
    manifest = Manifest.from_bytes((set_dir / "set.json").read_bytes())
    body = (set_dir / str(manifest.facts.payload_file)).read_bytes()
    plain = Envelope(capability=manifest.capability, payload=body, set=manifest.digest)
    replicate = plain.model_copy(update={"intent": "replicate"})
    stem = manifest.name
    return {
        f"{stem}.json": plain.to_json() + b"\n",
        f"{stem}.cbor": plain.to_cbor(),
        f"{stem}-replicate.json": replicate.to_json() + b"\n",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.sample_envelopes")
    parser.add_argument("--out", type=Path, default=envelopes_dir())
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for set_dir in sorted(p for p in sets_dir().iterdir() if (p / "set.json").is_file()):
        for name, data in sample_envelopes(set_dir).items():
            (args.out / name).write_bytes(data)
            print(f"wrote {args.out / name} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
