"""``python -m wai_dispatch.tools.int8_check``: an int8 engine of ``wai-ops/1`` (``--engine int8``
or ``int8-graph``) on this CPU, or an emulated one (``qemu-x86_64 -cpu Haswell``), against the
pinned hashes and the int64 reference, in one JSON line (docs/wai-ops.md).

Checks: the named neural-conformance payloads decode to their pinned hashes; the hyperprior's
hyper-synthesis at its range's ends equals the reference; and the 16-bit edge layer (every pair
of products at the largest the planes allow) equals the reference. ``--plane-bits 8`` is
expected to saturate on AVX2 without VNNI. Exit status 0 when every check holds."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import load
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths.onnx import configure_thread_pool
from wai_dispatch.paths.waiops import int8_engine, int8_graph, reference
from wai_dispatch.paths.waiops.adapter import load_set_program
from wai_dispatch.paths.waiops.build import ProgramBuilder
from wai_dispatch.paths.waiops.choose import int8_units
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.service.decoding.results import rgb_digest

SMALL = ("chelsea-16x16", "extreme-symbols-320x192")


def edge_program(ci: int = 16, co: int = 4) -> tuple[Program, np.ndarray]:
    """A 3×3 convolution whose input is the range's top (every 7-bit plane 127) or bottom, and
    whose weights are ±127 in runs of one sign, so pairs of products reach ``2 · 127 · 127``;
    the input: one [1, ci, 6, 7] latent of both ends and a border of zeros."""
    lo, hi = -8192, 8191  # u = x − lo spans 0…16383: two 7-bit planes, both 127 at the top
    rng = np.random.default_rng(28)
    w = np.where(np.arange(co)[:, None, None, None] % 2 == 0, 127, -127) * np.ones(
        (co, ci, 3, 3), dtype=np.int64
    )
    w[co // 2 :, : ci // 2] *= -1
    b = ProgramBuilder("x", ci, (lo, hi))
    b.add(
        "conv2d",
        "edge",
        ["x"],
        "y",
        {"kernel": 3, "padding": 1},
        {"weight": w.astype(np.int8), "bias": rng.integers(-99, 99, co).astype(np.int32)},
    )
    program = load_program(b.program_json("y", co), b.weights())
    x = np.full((1, ci, 6, 7), hi, dtype=np.int32)
    x[:, :, 4:] = lo
    x[:, :, :, 0] = 0
    x[:, ci // 2 :, 2] = lo
    return program, x


def graph_edge_program(bits: int = 7, ci: int = 16, co: int = 4) -> tuple[Program, np.ndarray]:
    """The int8 graph engine's edge layer: a 3×3 convolution whose weights are all 127 (stored
    as 127 + 128 = 255, the largest uint8) over inputs whose every balanced ``bits``-bit plane
    is at its most negative (−2^(bits−1)) or whose low plane is and whose top plane is at its
    largest, so every pair of products is ``±2 · 255 · 2^(bits−1)``; a border of zeros."""
    half = 1 << (bits - 1)
    base = 1 << bits
    low = -half - half * base  # both planes −half
    top = min(half, 127) * base - half  # low plane −half, top plane as large as it goes
    b = ProgramBuilder("x", ci, (low, top))
    w = np.full((co, ci, 3, 3), 127, dtype=np.int8)
    bias = np.arange(co, dtype=np.int32) - 2
    b.add("conv2d", "edge", ["x"], "y", {"kernel": 3, "padding": 1}, {"weight": w, "bias": bias})
    program = load_program(b.program_json("y", co), b.weights())
    x = np.full((1, ci, 6, 7), low, dtype=np.int32)
    x[:, :, 3:] = top
    x[:, :, :, 0] = 0
    return program, x


def _engine(name: str, program: Program) -> Any:
    if name == "int8-graph":
        return int8_graph.Int8GraphEngine(program)
    return int8_engine.Int8Engine(program)


HYPER_SET = "bmshj2018-hyperprior-int8-units-demo-q3"


def hyper_program(folder: Path | None = None) -> Program:
    """The hyper-synthesis of the hyperprior set in ``folder`` (the bundled one by default)."""
    folder = folder if folder is not None else sets_dir() / HYPER_SET
    facts = json.loads((folder / "set.json").read_bytes())["facts"]["hyperprior"]
    return load_program(
        (folder / facts["program"]).read_bytes(), (folder / facts["weights"]).read_bytes()
    )


def run(
    payloads: Sequence[str],
    hyper: bool = True,
    engine_name: str = "int8",
    hyper_set: Path | None = None,
) -> dict[str, Any]:
    """Every check as ``{"name": ok}`` with the CPU's int8 units (``h_s`` from the hyperprior
    set in ``hyper_set``, the bundled one by default)."""
    graph = engine_name == "int8-graph"
    bits = int8_graph.PLANE_BITS if graph else int8_engine.PLANE_BITS
    out: dict[str, Any] = {"cpu": int8_units(), "plane_bits": bits, "engine": engine_name}
    checks: dict[str, bool] = {}
    program, x = graph_edge_program(bits) if graph else edge_program()
    got = _engine(engine_name, program).run(x)
    checks["edge-16-bit-pairs"] = bool(np.array_equal(got, reference.run(program, x)))
    corpus = neural_conformance_dir()
    doc = json.loads((corpus / "corpus.json").read_bytes())
    files = load(sets_dir() / doc["set_name"], doc["set"])
    synth, tables = load_set_program(files), tables_of(files)
    engine = _engine(engine_name, synth) if payloads else None
    for case in doc["payloads"]:
        if case["name"] not in payloads or engine is None:
            continue
        symbols = codec_payload.decode((corpus / case["payload"]).read_bytes(), tables)
        rgb = engine.run(symbols)[0].transpose(1, 2, 0).astype(np.uint8)
        checks[case["name"]] = rgb_digest(rgb) == case["rgb8_blake3"]
    if hyper:
        h = hyper_program(hyper_set)
        z = np.random.default_rng(5).choice(np.array(h.input_range), (1, h.input_channels, 3, 2))
        z = z.astype(np.int32)
        got = _engine(engine_name, h).run(z)
        checks["hyperprior-h_s"] = bool(np.array_equal(got, reference.run(h, z)))
    out["checks"] = checks
    out["ok"] = all(checks.values())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.int8_check")
    parser.add_argument("--payloads", nargs="*", default=list(SMALL))
    parser.add_argument("--all", action="store_true", help="every payload of the corpus")
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime's pool size")
    parser.add_argument("--no-hyper", action="store_true")
    parser.add_argument("--hyper-set", type=Path, help="the hyperprior set whose h_s to check")
    parser.add_argument("--plane-bits", type=int, default=None, help="7, the engines' own")
    parser.add_argument("--engine", choices=("int8", "int8-graph"), default="int8")
    args = parser.parse_args(argv)
    threads = configure_thread_pool(args.threads)
    if args.plane_bits is not None:
        mod = int8_graph if args.engine == "int8-graph" else int8_engine
        mod.set_plane_bits(args.plane_bits)
    payloads = args.payloads
    if args.all:
        doc = json.loads((neural_conformance_dir() / "corpus.json").read_bytes())
        payloads = [p["name"] for p in doc["payloads"]]
    result = run(payloads, not args.no_hyper, args.engine, args.hyper_set)
    result["threads"] = threads
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
