"""``python -m wai_dispatch.tools.capacity``: the inputs of docs/scaling.md measured here — one
decode's CPU seconds on one core (``process_time``, one ONNX Runtime thread) per path and size,
the PNG's, the rows and bytes a decode adds to the store — the fleet table computed from them,
and its latency claims checked by simulating one replica's admission (tools/queue_sim.py)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from wai_dispatch.codec import payload
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.dispatch.report import Report
from wai_dispatch.paths.onnx import configure_thread_pool
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.store.records import records_for
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.tools.bench_decode import SIZES, _model, picture_latent
from wai_dispatch.tools.harness import loadavg
from wai_dispatch.tools.queue_sim import simulate

FLEETS = (10_000, 100_000, 1_000_000)  # sinks, one envelope a minute each
CORES_PER_REPLICA = 8
UTILISATION = 0.8
RETENTION_DAYS = 30


def latents(checkpoint: str | None) -> dict[str, Any]:
    """The quantized latent of a photograph per picture size, from the demo model's analysis
    (each set codes it with its own tables)."""
    net = _model(checkpoint)
    return {f"{w}×{h}": picture_latent(net, h, w)[1] for h, w in SIZES}


def cpu_per_decode(decoder: Decoder, repeats: int, symbols: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for item in decoder.set_store.list():
        files = decoder.opened.loaded(item.digest)
        if HyperStage.of(files) is not None:
            continue  # the float sets' figures; bench_hyperprior measures the hyperprior's
        tables = tables_of(files)
        for size, sym in symbols.items():
            body = payload.encode(np.asarray(sym), tables)
            result = decoder.decode_payload(
                body, capability=item.capability, set_digest=item.digest
            )
            ran = result.reports[-1].ran
            samples, png = [], []
            for _ in range(repeats):
                t0 = time.process_time()
                result = decoder.decode_payload(
                    body, capability=item.capability, set_digest=item.digest
                )
                t1 = time.process_time()
                result.png()
                png.append(time.process_time() - t1)
                samples.append(t1 - t0)
            rows.append(
                {
                    "capability": item.capability,
                    "path": str(ran.path) if ran else None,
                    "picture": size,
                    "payload_bytes": len(body),
                    "cpu_s": samples,
                    "png_s": statistics.median(png),
                    "reports": [r.to_json() for r in result.reports],
                    "set": item.digest,
                    "symbols_digest": result.part.symbols_digest,
                    "rgb_digest": result.rgb_digest,
                }
            )
    return rows


def store_cost(url: str, sample: dict[str, Any], n: int) -> dict[str, float]:
    """Rows and bytes ``n`` decodes' records add to a fresh store at ``url``, and the inserts
    per second of one connection."""
    store = ReportStore(url)
    store.migrate()
    reports = [Report.from_json(r) for r in sample["reports"]]
    before_rows, before_bytes = _rows(store), _bytes(store)
    t0 = time.perf_counter()
    for i in range(n):
        store.insert(
            records_for(
                reports,
                request_id=str(uuid.uuid4()),
                sink=f"sink-{i % 100}",
                set_digests=[sample["set"]],
                symbols_digests=[sample["symbols_digest"]],
                rgb_digest=sample["rgb_digest"],
                duration_ms=12.5,
            )
        )
    took = time.perf_counter() - t0
    rows, size = _rows(store) - before_rows, _bytes(store) - before_bytes
    store.dispose()
    return {"rows": rows / n, "bytes": size / n, "inserts_per_s": n / took}


def _rows(store: ReportStore) -> int:
    """The rows of every table; a partitioned table's once (its partitions, which PostgreSQL
    lists as tables too, hold the same rows)."""
    with store.engine.connect() as conn:
        names = [t for t in store.engine.dialect.get_table_names(conn) if t != "alembic_version"]
        if store.engine.dialect.name == "postgresql":
            got = conn.execute(text("SELECT inhrelid::regclass::text FROM pg_inherits"))
            parts = set(got.scalars())
            names = [t for t in names if t not in parts]
        return sum(conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one() for t in names)


def _bytes(store: ReportStore) -> int:
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            pages = conn.execute(text("PRAGMA page_count")).scalar_one()
            size = conn.execute(text("PRAGMA page_size")).scalar_one()
            return int(pages * size)
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())


def fleet_table(cpu_s: float, png_s: float, rows: float, bytes_: float) -> list[dict[str, Any]]:
    out = []
    for sinks in FLEETS:
        rate = sinks / 60
        cores = rate * (cpu_s + png_s) / UTILISATION
        replicas = max(1, -(-cores // CORES_PER_REPLICA))
        out.append(
            {
                "sinks": sinks,
                "decodes_per_s": rate,
                "cores": cores,
                "replicas": int(replicas),
                "pg_tx_per_s": rate,
                "pg_rows_per_s": rate * rows,
                "gb_per_day": rate * 86_400 * bytes_ / 1e9,
                "gb_retained": rate * 86_400 * RETENTION_DAYS * bytes_ / 1e9,
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.capacity", description=__doc__)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--inserts", type=int, default=2000)
    ap.add_argument("--postgres", help="a PostgreSQL URL whose database may be written to")
    ap.add_argument("--checkpoint", help="a CompressAI state dict (default: the demo one)")
    ap.add_argument("--json", action="store_true", help="print the measurements as JSON too")
    args = ap.parse_args(argv)
    configure_thread_pool(1)
    print(f"{loadavg()}; CPU seconds per decode on one core")
    with tempfile.TemporaryDirectory(prefix="wai-capacity-") as tmp:
        decoder = Decoder.assemble(Path(tmp) / "data")
        rows = cpu_per_decode(decoder, args.repeats, latents(args.checkpoint))
        print(
            f"{'path':<26} {'picture':<9} {'cpu ms (min/median)':>20} {'png ms':>7} {'/s/core':>8}"
        )
        for r in rows:
            lo, med = min(r["cpu_s"]) * 1e3, statistics.median(r["cpu_s"]) * 1e3
            print(
                f"{r['path']:<26} {r['picture']:<9} {lo:>9.1f} / {med:>7.1f} "
                f"{r['png_s'] * 1e3:>7.1f} {1 / (med / 1e3 + r['png_s']):>8.2f}"
            )
        stores = {"sqlite": f"sqlite:///{Path(tmp) / 'capacity.db'}"}
        if args.postgres:
            stores["postgresql"] = args.postgres
        costs = {}
        for name, url in stores.items():
            costs[name] = store_cost(url, rows[0], args.inserts)
            c = costs[name]
            print(
                f"store {name}: {c['rows']:.2f} rows and {c['bytes']:.0f} bytes a decode; "
                f"{c['inserts_per_s']:.0f} decodes' inserts/s on one connection"
            )
    cost = costs.get("postgresql", costs["sqlite"])
    for r in rows:
        if r["picture"] != "256×256":
            continue
        med = statistics.median(r["cpu_s"])
        print(
            f"\nfleet, {r['path']} at 256×256, one envelope a minute per sink, "
            f"{CORES_PER_REPLICA}-core replicas at {UTILISATION:.0%}:"
        )
        print(
            f"{'sinks':>9} {'decodes/s':>10} {'cores':>8} {'replicas':>9} {'PG tx/s':>8} "
            f"{'PG rows/s':>10} {'GB/day':>8} {'GB kept':>8}"
        )
        for f in fleet_table(med, r["png_s"], cost["rows"], cost["bytes"]):
            print(
                f"{f['sinks']:>9,} {f['decodes_per_s']:>10.0f} {f['cores']:>8.1f} "
                f"{f['replicas']:>9} {f['pg_tx_per_s']:>8.0f} {f['pg_rows_per_s']:>10.0f} "
                f"{f['gb_per_day']:>8.2f} {f['gb_retained']:>8.1f}"
            )
        service = [s + r["png_s"] for s in r["cpu_s"]]
        mean = statistics.fmean(service)
        rate = UTILISATION * CORES_PER_REPLICA / mean
        sim = simulate(rate, CORES_PER_REPLICA, service, queue=8, timeout_s=30.0, n=200_000)
        median_ms = statistics.median(service) * 1e3
        print(
            f"simulated replica ({CORES_PER_REPLICA} workers, queue 8, {rate:.1f} req/s, "
            f"utilisation {sim.utilisation:.2f}): p50 {sim.p50_s * 1e3:.1f} ms, "
            f"p99 {sim.p99_s * 1e3:.1f} ms (service median {median_ms:.1f} ms), "
            f"refused {sim.refused:.2%}"
        )
    if args.json:
        print(json.dumps({"decodes": rows, "stores": costs}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
