"""``python -m wai_dispatch.tools.neural_conformance``: write the integer capability's conformance
corpus (``conformance/neural-conformance/``, its README says what it holds): payloads of several
sizes coded against the bundled ``int-synth-int8-units-demo-q3`` set's tables, each with its
``symbols_digest`` and the BLAKE3 of the RGB8 picture the set's wai-ops/1 program decodes it to
(computed by the int64 reference interpreter and checked against the fast engine)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import Manifest, load
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths.waiops import reference
from wai_dispatch.paths.waiops.adapter import load_set_program
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.service.decoding.results import rgb_digest
from wai_dispatch.tools.bmshj2018_model import load_model
from wai_dispatch.tools.bmshj2018_symbols import encode_symbols
from wai_dispatch.tools.train_bmshj2018 import load_image

CORPUS_FORMAT = "wai-neural-conformance/1"
SYMBOLS_SEED = 20261130


def program_rgb8(output: np.ndarray) -> np.ndarray:
    """The program's output (int32 [1, 3, H, W], proven in 0…255) as H×W×3 uint8."""
    return np.ascontiguousarray(output[0].transpose(1, 2, 0).astype(np.uint8))


def _pictures() -> list[tuple[str, Callable[[], np.ndarray], str]]:
    def crop(name: str, top: int, left: int, h: int, w: int) -> Callable[[], np.ndarray]:
        return lambda: np.ascontiguousarray(load_image(name)[top : top + h, left : left + w])

    def strip() -> np.ndarray:
        band = load_image("coffee")[200:216]  # 16 × 600
        return np.ascontiguousarray(np.tile(band, (1, 7, 1))[:, :4096])

    return [
        ("coffee-256x256", crop("coffee", 45, 167, 256, 256), "skimage coffee, crop (45, 167)"),
        (
            "chelsea-448x288",
            crop("chelsea", 0, 0, 288, 448),
            "skimage chelsea, 288 rows × 448 columns at (0, 0)",
        ),
        (
            "hubble-768x512",
            crop("hubble_deep_field", 100, 80, 512, 768),
            "skimage hubble_deep_field, 512 rows × 768 columns at (100, 80)",
        ),
        (
            "coffee-strip-4096x16",
            strip,
            "skimage coffee rows 200…215 tiled 4096 wide: a 1×256 latent (width limit)",
        ),
        (
            "chelsea-16x16",
            crop("chelsea", 150, 200, 16, 16),
            "skimage chelsea, 16×16 crop: a 1×1 latent",
        ),
    ]


def _extreme_symbols(channels: int, lo: int, hi: int) -> np.ndarray:
    """A 12×20 latent whose symbols sit at the program's declared range's ends and around 0:
    the bound rule's edge, rounding ties included wherever they fall."""
    rng = np.random.default_rng(SYMBOLS_SEED)
    choices = np.array([lo, hi, 0, lo + 1, hi - 1, -1, 1], dtype=np.int32)
    return rng.choice(choices, size=(1, channels, 12, 20)).astype(np.int32)


def write_index(out: Path, made_for: Any, payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """A corpus's ``corpus.json`` in ``out``: its payloads and the set (a manifest or loaded
    set: its capability, digest and name) they are coded for."""
    doc = {
        "format": CORPUS_FORMAT,
        "capability": made_for.capability,
        "set": made_for.digest,
        "set_name": made_for.name,
        "payloads": payloads,
    }
    (out / "corpus.json").write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def write_corpus(out: Path, set_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    files = load(set_dir, Manifest.from_bytes((set_dir / "set.json").read_bytes()).digest)
    program, tables = load_set_program(files), tables_of(files)
    model, _ = load_model(checkpoint=None, pretrained=False, quality=int(files.facts.quality or 3))
    engine = Engine(program)
    lo, hi = program.input_range
    cases: list[tuple[str, np.ndarray, str]] = []
    for name, picture, source in _pictures():
        symbols, _ = encode_symbols(model, picture())
        cases.append((name, np.clip(symbols.numpy(), lo, hi).astype(np.int32), source))
    cases.append(
        (
            "extreme-symbols-320x192",
            _extreme_symbols(program.input_channels, lo, hi),
            f"symbols (seed {SYMBOLS_SEED}) at the declared range's ends {lo}, {hi} and near 0",
        )
    )
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, symbols, source in cases:
        body = codec_payload.encode(symbols, tables)
        if not np.array_equal(codec_payload.decode(body, tables), symbols):
            raise RuntimeError(f"{name}: the payload does not decode to its symbols")
        fast = program_rgb8(engine.run(symbols))
        if symbols.shape[2] * symbols.shape[3] <= 600:  # the reference is slow; small ones
            slow = program_rgb8(reference.run(program, symbols))
            if not np.array_equal(slow, fast):
                raise RuntimeError(f"{name}: the engine differs from the reference")
        (out / f"{name}.waip").write_bytes(body)
        entries.append(
            {
                "name": name,
                "payload": f"{name}.waip",
                "latent_shape": list(symbols.shape),
                "picture_shape": [fast.shape[0], fast.shape[1], 3],
                "symbols_digest": codec_payload.symbols_digest(symbols),
                "rgb8_blake3": rgb_digest(fast),
                "source": source,
            }
        )
        log(f"{name}: {len(body)} bytes, {fast.shape[1]}×{fast.shape[0]}")
    return write_index(out, files, entries)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.neural_conformance")
    parser.add_argument("--out", type=Path, default=neural_conformance_dir())
    parser.add_argument("--set", type=Path, default=sets_dir() / "int-synth-int8-units-demo-q3")
    args = parser.parse_args(argv)
    write_corpus(args.out, args.set, log=lambda m: print(m, file=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
