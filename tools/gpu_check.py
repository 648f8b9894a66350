"""One command for a machine with a GPU: decode the integer capability's conformance corpus
through the ``gpu/wgsl/integer`` kernels, check every RGB8 hash, time each decode's synthesis
against the interpreter's (median of ``--repeat`` after a warm-up), and print one summary.
``tools/gpu_check.sh`` runs it. Exit status 0 when every hash matches (and, with
``--require-gpu``, the adapter is a GPU), else 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import load
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths.waiops.adapter import load_set_program
from wai_dispatch.paths.waiops.engine import Engine
from wai_dispatch.paths.waiops.onnx_engine import OnnxEngine
from wai_dispatch.paths.wgsl.execute import run_program
from wai_dispatch.paths.wgsl.runner import Runner, UnitAbsent
from wai_dispatch.service.decoding.results import rgb_digest
from wai_dispatch.tools.harness import timings
from wai_dispatch.tools.neural_conformance import program_rgb8


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    out = fn()  # warm-up: pipelines, weight buffers, ONNX sessions
    return out, statistics.median(timings(fn, repeat))


def _interpreter(program: Any) -> Any:
    """The interpreter's engine, chosen as ``cpu/wai-ops/integer`` chooses it."""
    if getattr(program, "float32_exact", False):
        try:
            return OnnxEngine(program)
        except ImportError:
            pass

    return Engine(program)


def check(repeat: int = 3, skip: Sequence[str] = ()) -> dict[str, Any]:
    """Every corpus payload through the kernels and the interpreter: hashes and times."""

    corpus = neural_conformance_dir()
    doc = json.loads((corpus / "corpus.json").read_bytes())
    files = load(sets_dir() / doc["set_name"], doc["set"])
    program, tables = load_set_program(files), tables_of(files)
    runner = Runner.acquire()
    interpreter = _interpreter(program)
    constants: dict[tuple[str, str], Any] = {}
    rows = []
    for case in doc["payloads"]:
        if case["name"] in skip:
            continue
        symbols = codec_payload.decode((corpus / case["payload"]).read_bytes(), tables)
        gpu, gpu_s = _timed(partial(run_program, runner, program, symbols, constants), repeat)
        cpu, cpu_s = _timed(partial(interpreter.run, symbols), repeat)
        got = rgb_digest(program_rgb8(gpu))
        rows.append(
            {
                "payload": case["name"],
                "picture": case["picture_shape"][:2],
                "ok": got == case["rgb8_blake3"] and np.array_equal(gpu, cpu),
                "rgb8_blake3": got,
                "wgsl_s": round(gpu_s, 4),
                "interpreter_s": round(cpu_s, 4),
            }
        )
    return {
        "adapter": runner.info,
        "is_gpu": runner.is_gpu,
        "interpreter": type(interpreter).__name__,
        "repeat": repeat,
        "payloads": rows,
        "ok": bool(rows) and all(r["ok"] for r in rows),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per payload (median)")
    parser.add_argument("--skip", nargs="*", default=[], metavar="NAME", help="payloads to skip")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--require-gpu", action="store_true", help="fail on a software adapter")
    args = parser.parse_args(argv)

    try:
        summary = check(max(1, args.repeat), args.skip)
    except UnitAbsent as exc:
        print(f"gpu_check: no WebGPU adapter: {exc}", file=sys.stderr)
        return 1
    ok = summary["ok"] and (summary["is_gpu"] or not args.require_gpu)
    if args.json:
        print(json.dumps(summary))
        return 0 if ok else 1
    a = summary["adapter"]
    print(
        f"adapter     {a['device']} ({a['adapter_type']}, {a['backend_type']}; {a['description']})"
    )
    print(f"interpreter {summary['interpreter']}; median of {summary['repeat']} after a warm-up")
    print(f"{'payload':28} {'picture':>10} {'wgsl s':>9} {'interp s':>9} {'ratio':>7}  hash")
    for r in summary["payloads"]:
        h, w = r["picture"]
        ratio = r["interpreter_s"] / r["wgsl_s"] if r["wgsl_s"] else float("inf")
        verdict = "ok" if r["ok"] else "MISMATCH"
        print(
            f"{r['payload']:28} {w:>5}x{h:<4} {r['wgsl_s']:9.3f} {r['interpreter_s']:9.3f} "
            f"{ratio:6.2f}x  {verdict}"
        )
    total_g = sum(r["wgsl_s"] for r in summary["payloads"])
    total_c = sum(r["interpreter_s"] for r in summary["payloads"])
    placed = "gpu" if summary["is_gpu"] else "cpu (a software adapter: §5 refuses the path)"
    print(
        f"summary: {sum(r['ok'] for r in summary['payloads'])}/{len(summary['payloads'])} "
        f"hashes match; wgsl {total_g:.3f} s vs interpreter {total_c:.3f} s; placement {placed}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
