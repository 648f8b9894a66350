"""``python -m wai_dispatch.tools.bench_tiles``: a decode's peak memory (VmHWM) by picture size,
tiled and untiled (paths/tiling.py), on the float and the integer CPU sets; then 4096×4096
through the CLI and the service on the default settings (``--no-big`` skips them).

Each decode runs in a fresh warm process with the high-water mark reset (``clear_refs``), its
payload the corpus's 768×512 symbols repeated to the size (real content, not a zero latent).
Untiled only up to ``--untiled-max``: its memory grows with the picture."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_dispatch.codec import payload
from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.settings import Settings, load
from wai_dispatch.tools.harness import decode_headers, fresh, loadavg, memory_kib, parser, service

SETS = {"float": "bmshj2018-demo-q3", "integer": "int-synth-int8-units-demo-q3"}
UNTILED = str(1 << 50)


def envelope_of(store: Any, set_name: str, height: int, width: int) -> Any:
    """An envelope of the bundled set ``set_name`` whose payload codes the corpus's 768×512
    symbols (hubble) repeated over a ``height × width`` latent."""

    manifest = Manifest.from_bytes((sets_dir() / set_name / "set.json").read_bytes())
    files = store.open(manifest.digest)
    tables = EntropyTables.from_json(files.read(str(files.facts.tables)))
    source = payload.decode((neural_conformance_dir() / "hubble-768x512.waip").read_bytes(), tables)
    reps = (1, 1, -(-height // source.shape[2]), -(-width // source.shape[3]))
    symbols = np.ascontiguousarray(np.tile(source, reps)[:, :, :height, :width])
    body = payload.encode(symbols.astype(np.int32), tables)
    return Envelope(capability=manifest.capability, payload=body, set=manifest.digest)


def decode_worker(data_dir: str, set_name: str, height: int, width: int) -> dict[str, Any]:
    """One decode of a ``height × width`` latent in this process, on a warm session with the
    high-water mark reset: the resident bytes before, the peak, the seconds."""
    decoder = Decoder.assemble(**load(data_dir=data_dir).decoder_args())
    small = envelope_of(decoder.set_store, set_name, 4, 4)
    big = envelope_of(decoder.set_store, set_name, height, width)
    decoder.decode(small).png()  # the session is built and warm
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    base = memory_kib()["VmRSS"] * 1024
    t0 = time.perf_counter()
    result = decoder.decode(big)
    png = result.png()
    took = time.perf_counter() - t0
    ran = result.reports[-1].ran
    path = str(ran.path) if ran is not None else None
    peak = memory_kib()["VmHWM"] * 1024
    return {"base": base, "peak": peak, "seconds": took, "path": path, "png": len(png)}


def in_process(data_dir: Path, kind: str, side: int, tile_bytes: str | None) -> dict[str, Any]:
    """One decode of a ``side × side`` latent in a fresh process; its memory and time."""
    env = {k: v for k, v in os.environ.items() if k != "WAI_TILE_BYTES"}
    env |= {"WAI_TILE_BYTES": tile_bytes} if tile_bytes is not None else {}
    return fresh(decode_worker, str(data_dir), SETS[kind], side, side, env=env)


def cli_4096(data_dir: Path, kind: str, side: int) -> dict[str, Any]:
    """``wai-dispatch decode`` of a ``side``² latent with the default settings: its peak
    resident memory (``wait4``'s ``ru_maxrss``) and wall time, start to exit."""

    store = Decoder.assemble(data_dir, adapters={}).set_store
    path = data_dir / f"{kind}-{side}.json"
    path.write_bytes(envelope_of(store, SETS[kind], side, side).to_json())
    png = data_dir / f"{kind}-{side}.png"
    env = {k: v for k, v in os.environ.items() if k != "WAI_TILE_BYTES"}
    t0 = time.perf_counter()
    decode = ["-m", "wai_dispatch", "decode", str(path), "-o", str(png), "--data-dir"]
    proc = subprocess.Popen(
        [sys.executable, *decode, str(data_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    return {
        "status": os.waitstatus_to_exitcode(status),
        "peak": usage.ru_maxrss * 1024,
        "seconds": took,
        "png": png.stat().st_size if png.exists() else 0,
        "error": err.strip()[-300:],
    }


def service_4096(
    data_dir: Path, kind: str, side: int, timeout_s: float | None = None
) -> dict[str, Any]:
    """One ``POST /v1/decode`` (raw PNG answer) of a ``side``² latent to ``wai-dispatch
    serve`` on the default settings (``decode_timeout_s`` raised to ``timeout_s`` where
    given: a loaded machine runs past the default 30 s); the server's VmHWM after it."""
    import httpx

    body = (data_dir / f"{kind}-{side}.json").read_bytes()
    env = {"WAI_DECODE_TIMEOUT_S": str(timeout_s)} if timeout_s is not None else {}
    with service(data_dir, env) as served:
        base = memory_kib(served.proc.pid)["VmHWM"] * 1024
        t0 = time.perf_counter()
        r = httpx.post(
            f"{served.url}/v1/decode",
            content=body,
            headers=decode_headers(served.token, Accept="image/png"),
            timeout=600,
        )
        took = time.perf_counter() - t0
        peak = memory_kib(served.proc.pid)["VmHWM"] * 1024
    return {
        "status": r.status_code,
        "peak": peak,
        "base": base,
        "seconds": took,
        "png": len(r.content),
        "error": "" if r.status_code == 200 else r.text[:300],
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = parser("tiles", __doc__, quick="one small size per path (smoke)")
    p.add_argument("--sides", type=int, nargs="*", default=[16, 32, 64, 128], help="latent sides")
    p.add_argument("--untiled-max", type=int, default=64, help="largest latent side untiled")
    p.add_argument("--no-big", dest="big", action="store_false", help="skip 4096² CLI, service")
    p.add_argument("--kinds", nargs="*", default=list(SETS), choices=list(SETS))
    p.add_argument("--decode-timeout", type=float, help="the service's decode_timeout_s (--big)")
    args = p.parse_args(argv)
    sides = [16] if args.quick else args.sides
    print("one decode's peak memory (VmHWM, fresh warm process; MB over the warm process and")
    print("total) by picture size, tiled (the default WAI_TILE_BYTES) and untiled:")
    print(
        f"  {'path':8} {'picture':>11} {'tiled +MB':>9} {'peak MB':>8} {'s':>6}   "
        f"{'untiled +MB':>11} {'peak MB':>8} {'s':>6}"
    )
    with tempfile.TemporaryDirectory(prefix="wai-bench-tiles-") as tmp:
        data_dir = Path(tmp)
        for kind in args.kinds:
            for side in sides:
                tiled = in_process(data_dir, kind, side, None)
                untiled = (
                    in_process(data_dir, kind, side, UNTILED) if side <= args.untiled_max else None
                )
                line = (
                    f"  {kind:8} {f'{16 * side}×{16 * side}':>11} "
                    f"{(tiled['peak'] - tiled['base']) / 2**20:9.0f} "
                    f"{tiled['peak'] / 2**20:8.0f} {tiled['seconds']:6.1f}   "
                )
                if untiled is not None:
                    line += (
                        f"{(untiled['peak'] - untiled['base']) / 2**20:11.0f} "
                        f"{untiled['peak'] / 2**20:8.0f} {untiled['seconds']:6.1f}"
                    )
                else:
                    line += f"{'(not run)':>11}"
                print(line, flush=True)
        if args.big and not args.quick:
            budget = Settings.model_fields["memory_budget_bytes"].default
            print(
                f"\n4096×4096 with the default settings (memory_budget_bytes {budget >> 20} "
                f"MiB; decode_timeout_s {args.decode_timeout or 'default'}), {loadavg()}:"
            )
            for kind in args.kinds:
                cli = cli_4096(data_dir, kind, 256)
                print(
                    f"  {kind:8} CLI      exit {cli['status']} peak {cli['peak'] / 2**20:6.0f} MB "
                    f"{cli['seconds']:6.1f} s  PNG {cli['png'] / 2**20:.1f} MB "
                    f"{cli['error']}",
                    flush=True,
                )
                svc = service_4096(data_dir, kind, 256, args.decode_timeout)
                print(
                    f"  {kind:8} service  HTTP {svc['status']} peak {svc['peak'] / 2**20:6.0f} "
                    f"MB {svc['seconds']:6.1f} s  PNG {svc['png'] / 2**20:.1f} MB "
                    f"{svc['error']}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
