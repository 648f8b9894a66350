"""``python -m wai_dispatch.tools.hyperprior_conformance``: write the hyperprior capability's
conformance corpus (``conformance/neural-conformance/bmshj2018-hyperprior/``; its README says
what it holds): ``WAIH`` payloads of several sizes coded by :func:`encode_hyperprior` against the
bundled ``bmshj2018-hyperprior-int8-units-demo-q3`` set, each with its symbols digest (z then
y), which every machine's entropy stage must reproduce (§3, entropy-consistency). The payloads
are pure functions of the pictures, the demo checkpoint and the set (exact analysis)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.hyperprior_encode import encode_hyperprior, open_folder
from wai_dispatch.tools.neural_conformance import write_index
from wai_dispatch.tools.train_bmshj2018 import load_image

SET_NAME = "bmshj2018-hyperprior-int8-units-demo-q3"
FOLDER = "bmshj2018-hyperprior"
SYMBOLS_SEED = 20261201


def corpus_dir() -> Path:
    return neural_conformance_dir() / FOLDER


def _pictures() -> list[tuple[str, tuple[str, int, int, int, int]]]:
    return [
        ("coffee-256x256", ("coffee", 45, 167, 256, 256)),
        ("chelsea-448x256", ("chelsea", 20, 0, 256, 448)),
        ("hubble-512x384", ("hubble_deep_field", 100, 80, 384, 512)),
        ("chelsea-64x64", ("chelsea", 150, 200, 64, 64)),
    ]


def _extreme(stage: HyperStage) -> bytes:
    """z at its declared range's ends and around 0, y with values far outside every table
    (escapes) and around 0: a 2×3 side latent."""
    rng = np.random.default_rng(SYMBOLS_SEED)
    lo, hi = stage.program.input_range
    z = rng.choice(np.array([lo, hi, 0, -1, 1]), size=(1, stage.program.input_channels, 2, 3))
    z = z.astype(np.int32)
    index = stage.indexes(z, Limits())
    y = rng.choice(np.array([0, 1, -1, 5000, -5000, 70000]), size=index.shape).astype(np.int32)
    return waih.encode(z, y, index, stage.z_tables, stage.y_tables)


def write_corpus(out: Path, set_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    files = open_folder(set_dir)
    stage = HyperStage.of(files)
    assert stage is not None
    entries = []
    out.mkdir(parents=True, exist_ok=True)
    items: list[tuple[str, bytes, str, list[int]]] = []
    for name, (image, top, left, h, w) in _pictures():
        picture = np.ascontiguousarray(load_image(image)[top : top + h, left : left + w])
        source = f"skimage {image}, {h} rows × {w} columns at ({top}, {left})"
        items.append((name, encode_hyperprior(files, picture), source, [h, w, 3]))
    items.append(
        ("extreme-2x3", _extreme(stage), f"symbols drawn with seed {SYMBOLS_SEED}", [128, 192, 3])
    )
    for name, payload, source, shape in items:
        result = stage.run(payload, limits=Limits())
        header = waih.read_header(payload)
        (out / f"{name}.waih").write_bytes(payload)
        entries.append(
            {
                "name": name,
                "payload": f"{name}.waih",
                "side_latent_shape": list(header.z.shape),
                "latent_shape": list(header.y_shape),
                "picture_shape": shape,
                "symbols_digest": result.symbols_digest,
                "source": source,
            }
        )
        log(f"{name}: {len(payload)} bytes, symbols {result.symbols_digest[:16]}…")
    return write_index(out, files, entries)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.hyperprior_conformance")
    parser.add_argument("--out", type=Path, default=corpus_dir())
    parser.add_argument("--set", type=Path, default=sets_dir() / SET_NAME)
    args = parser.parse_args(argv)
    write_corpus(args.out, args.set)
    return 0


if __name__ == "__main__":
    sys.exit(main())
