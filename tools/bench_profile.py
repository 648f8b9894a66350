"""``python -m wai_dispatch.tools.bench_profile``: a warm decode's stages as the decoder runs them,
and ONNX Runtime's per-operator profile of the set's graph as the adapter builds it, at 256×256
and 768×512; each share is of the same run's decode (the anchor)."""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec.envelope import parse
from wai_dispatch.codec.payload import entropy_stage, read_header
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import (
    OnnxRuntimeAdapter,
    configure_thread_pool,
    shared_session_options,
)
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import to_rgb8
from wai_dispatch.tools.bench_tiles import envelope_of
from wai_dispatch.tools.harness import kernel_times, loadavg, parser
from wai_dispatch.tools.onnx_synthesis import rewritten_model

SET = "bmshj2018-demo-q3"


def stages(decoder: Any, body: bytes, repeats: int) -> dict[str, float]:
    """Best seconds of each stage of ``Decoder.decode``, run as the decoder runs them."""

    adapter = next(a for a in decoder.adapters.values() if isinstance(a, OnnxRuntimeAdapter))
    best: dict[str, float] = defaultdict(lambda: float("inf"))
    for _ in range(repeats + 1):  # the first warms
        t0 = time.perf_counter()
        part = parse(body).parts()[0]
        header = read_header(part.payload, limits=decoder.limits)
        opened = decoder.opened.get(str(part.set), None)
        t1 = time.perf_counter()
        tables = opened.tables or tables_of(opened.files)  # as the decoder reads them
        stage = entropy_stage(part.payload, tables, limits=decoder.limits, header=header)
        t2 = time.perf_counter()
        out = adapter.run(SynthesisJob(opened.files, stage.latent, stage.symbols))
        t3 = time.perf_counter()
        to_rgb8(out)
        t4 = time.perf_counter()
        t5 = time.perf_counter()
        decoder.decode(body)
        t6 = time.perf_counter()
        for name, took in (
            ("parse, header, set", t1 - t0),
            ("entropy stage", t2 - t1),
            ("synthesis (ONNX Runtime)", t3 - t2),
            ("RGB8", t4 - t3),
            ("whole Decoder.decode", t6 - t5),
        ):
            best[name] = min(best[name], took)
    return dict(best)


def op_profile(files: Any, latent: np.ndarray, repeats: int) -> dict[str, float]:
    """ONNX Runtime's profile of the set's rewritten graph: microseconds by operator type,
    summed over ``repeats`` runs and a first, divided by the runs."""
    spec = files.facts.program("onnx-runtime")
    model, weights = files.read(spec.file), files.read(spec.weights)
    so = shared_session_options()
    so.add_external_initializers_from_files_in_memory(
        ["decoder.weights"], [weights], [len(weights)]
    )
    by_op: dict[str, float] = defaultdict(float)
    feeds = {"latent": latent}
    for _, op, us in kernel_times(rewritten_model(model, weights), so, feeds, repeats + 1):
        by_op[op] += us / (repeats + 1)
    return dict(by_op)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("profile", __doc__, threads=2, repeats=3, quick="64×64, one run (a smoke run)")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats = 1

    configure_thread_pool(args.threads)
    sizes = ((4, 4),) if args.quick else ((16, 16), (32, 48))
    print(f"profile of a warm decode, {args.threads} threads, best of {args.repeats}; {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="wai-bench-profile-") as tmp:
        decoder = Decoder.assemble(Path(tmp))
        for h, w in sizes:
            envelope = envelope_of(decoder.set_store, SET, h, w)
            body = envelope.to_json()
            times = stages(decoder, body, args.repeats)
            whole = times.pop("whole Decoder.decode")
            print(f"{w * 16}×{h * 16}: whole Decoder.decode {whole * 1e3:.1f} ms (the anchor)")
            for name, took in times.items():
                print(f"  {name:26} {took * 1e3:8.1f} ms {took / whole:6.1%}")
            part = parse(body).parts()[0]
            opened = decoder.opened.get(str(part.set), None)
            tables = opened.tables or tables_of(opened.files)
            latent = entropy_stage(part.payload, tables, limits=decoder.limits).latent
            ops = op_profile(opened.files, latent, args.repeats)
            total = sum(ops.values())
            print(
                f"  inside the synthesis, ONNX Runtime's profile ({total / 1e3:.1f} ms of "
                f"kernel time a run), by operator type:"
            )
            for op, us in sorted(ops.items(), key=lambda kv: -kv[1]):
                print(f"    {op:22} {us / 1e3:8.1f} ms {us / total:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
