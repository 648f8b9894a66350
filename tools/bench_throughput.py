"""``python -m wai_dispatch.tools.bench_throughput``: decodes of 256×256 envelopes per second per
core, in one process and in two at once, each on one thread, beside CompressAI's
``decompress()`` → RGB8 run the same way (the anchor); the rate is all decodes over the span
from the first start to the last end. Then batching: the set's session on a batch of 2 latents
beside 2 runs of one (the decoder batches nothing; this measures whether it would help)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec.envelope import parse
from wai_dispatch.codec.payload import entropy_stage
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.settings import load
from wai_dispatch.tools.bench_decode import _model
from wai_dispatch.tools.bench_envelope import pictures, rgb8
from wai_dispatch.tools.harness import best_of_interleaved, loadavg, parser, table, worker_argv
from wai_dispatch.tools.onnx_synthesis import ort_session, rewritten_model


def worker(kind: str, data_dir: str, data_file: str, seconds: float, go: str) -> dict[str, Any]:
    """One process, one thread: warm, say ready, wait for ``go`` to exist, decode for
    ``seconds``; its count and its start and end (``time.time()``)."""

    row = pickle.loads(Path(data_file).read_bytes())
    if kind == "ours":
        decoder = Decoder.assemble(**load(data_dir=data_dir).decoder_args())  # WAI_ORT_THREADS

        def one() -> object:
            return decoder.decode(row["envelope"]).rgb

    else:
        import torch

        torch.set_num_threads(1)
        net = _model(None)

        def one() -> object:
            with torch.no_grad():
                return rgb8(net.decompress(row["strings"], row["shape"])["x_hat"])

    one()
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    start = time.time()
    count = 0
    while time.time() - start < seconds or count == 0:
        one()
        count += 1
    return {"count": count, "start": start, "end": time.time()}


def per_core(kind: str, processes: int, data_dir: Path, data_file: Path, seconds: float) -> float:
    """Decodes per second per process (each one core) with ``processes`` at once."""
    go = data_dir / f"go-{kind}-{processes}"
    go.unlink(missing_ok=True)
    env = {
        **os.environ,
        "WAI_DATA_DIR": str(data_dir),
        "WAI_ORT_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }
    argv = worker_argv(worker, kind, str(data_dir), str(data_file), seconds, str(go))
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) for _ in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"throughput worker {kind} did not start ({line!r})")
    go.touch()
    results = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"throughput worker {kind} failed")
        results.append(json.loads(out.strip().splitlines()[-1]))
    span = float(max(r["end"] for r in results) - min(r["start"] for r in results))
    return sum(int(r["count"]) for r in results) / span / processes


def _batched_session(model: bytes, weights: bytes) -> Any:
    """The set's graph with its batch dimension made free, rewritten and built as the adapter
    builds it (the sub-pixel rewrite, optimisation level ALL, the process's pool)."""
    import onnx

    proto = onnx.load_from_string(model)
    for value in (*proto.graph.input, *proto.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    del proto.graph.value_info[:]
    return ort_session(rewritten_model(proto.SerializeToString(), weights), weights)


def batching(data_dir: Path, body: bytes, repeats: int) -> dict[str, Any]:
    """A batch of 2 same-shaped latents in one ONNX Runtime run beside 2 runs of 1, on the
    set's graph with its batch dimension made free (the set's own fixes it at 1)."""

    decoder = Decoder.assemble(data_dir)
    part = parse(body).parts()[0]
    files = decoder.opened.loaded(str(part.set))
    latent = entropy_stage(part.payload, tables_of(files), limits=decoder.limits).latent
    spec = files.facts.program("onnx-runtime")
    assert spec is not None and spec.file is not None and spec.weights is not None
    session = _batched_session(files.read(spec.file), files.read(spec.weights))
    name = session.get_inputs()[0].name
    pair = np.concatenate([latent, latent])

    def two_singles() -> object:
        return [session.run(None, {name: latent}) for _ in range(2)]

    def one_pair() -> object:
        return session.run(None, {name: pair})

    (a,) = session.run(None, {name: pair})
    (b,) = session.run(None, {name: latent})
    same = bool(np.array_equal(a[:1], b))
    best = best_of_interleaved({"singles": two_singles, "pair": one_pair}, repeats)
    return {"batch": best["pair"] / best["singles"], "same": same, **best}


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("throughput", __doc__, repeats=5, quick="64×64, short runs (a smoke run)")
    p.add_argument("--seconds", type=float, default=6.0, help="each in-process window (6)")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats = 0.2, 1

    (row,) = pictures(((64, 64),) if args.quick else ((256, 256),))
    picture = f"{row['width']}×{row['height']}"
    with tempfile.TemporaryDirectory(prefix="wai-bench-throughput-") as tmp:
        data_dir = Path(tmp)
        data_file = data_dir / "row.pickle"
        data_file.write_bytes(pickle.dumps(row))

        # the bundled set installed and its prepared graph cached before the workers start
        Decoder.assemble(data_dir).decode(row["envelope"])
        load_start = loadavg()
        rates = {
            (kind, n): per_core(kind, n, data_dir, data_file, args.seconds)
            for n in (1, 2)
            for kind in ("ours", "theirs")
        }
        batch = batching(data_dir, row["envelope"], args.repeats)
    print(f"{picture} envelopes; at the start: {load_start}")
    print(
        f"decodes/s per core, in-process, one thread a process, {args.seconds:g} s windows "
        f"(ratio: ours ÷ CompressAI, in rate: above 1, ours does more)"
    )
    o, t = ({n: rates[kind, n] for n in (1, 2)} for kind in ("ours", "theirs"))
    table(
        ["processes", "ours", "CompressAI", "ratio", "2 vs 1 proc"],
        ([str(n), o[n], t[n], o[n] / t[n], o[n] / o[1]] for n in (1, 2)),
        "- .2f .2f .2f .0%",
        indent="  ",
    )
    print(
        f"batching 2 same-shaped latents in one ONNX run: {batch['pair'] * 1e3:.1f} ms vs "
        f"2 single runs {batch['singles'] * 1e3:.1f} ms; ratio {batch['batch']:.2f} "
        f"(below 1: batching helps); batched output identical: {batch['same']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
