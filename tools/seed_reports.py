"""``python -m wai_dispatch.tools.seed_reports --count 100000``: fill a report store with
synthetic but valid reports spread over sinks, capabilities, sets, paths and time, for the
dashboard's tests and benchmarks; deterministic for a ``--seed``. Rows go in through the driver
in bulk, :data:`CHUNK` a transaction, in time order with their ``seq`` chosen here, counted into
every report roll-up chunk by chunk in the same transaction (counted here, each table's rows
upserted through the driver: memory stays flat and no statement groups the reports; the exact
tier's groups by day once at the end, rollups.rebuild_group_days); on PostgreSQL the sequence
is then moved past them, so the service's own inserts follow."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, func, select, text

from wai_dispatch.service.settings import load
from wai_dispatch.service.store import rollups
from wai_dispatch.service.store.models import RefusalRow, ReportRow
from wai_dispatch.service.store.records import UNITS
from wai_dispatch.service.store.report_store import ReportStore

BMSHJ, INT = "wai.neural.bmshj2018", "wai.neural.int_synth"
NPU = {"unit": "npu", "backend": "model-runtime", "arithmetic": "float"}
ORT = {"unit": "cpu", "backend": "onnx-runtime", "arithmetic": "float"}
WAIOPS = {"unit": "cpu", "backend": "wai-ops", "arithmetic": "integer"}
WGSL = {"unit": "gpu", "backend": "wgsl", "arithmetic": "integer"}
CHUNK = 50_000


def _path(p: dict[str, str]) -> str:
    return f"{p['unit']}/{p['backend']}/{p['arithmetic']}"


def dispatch_report(capability: str, needed: str, ran: Any, refused: list[Any]) -> dict[str, Any]:
    """A ``wai-neural-dispatch/1`` report."""
    return {
        "kind": "wai-neural-dispatch/1",
        "capability": capability,
        "needed": needed,
        "ran": ran,
        "refused": refused,
    }


def _report(rng: random.Random) -> dict[str, Any]:
    """One valid report of a plausible fleet mix (validated by the tests, not here)."""
    roll = rng.random()
    if roll < 0.45:  # the neural processor ran, some operations left on the CPU
        npu = rng.choice((21, 21, 21, 18))
        placement = {"npu": npu, "gpu": 0, "cpu": 21 - npu, "unknown": 0}
        return dispatch_report(BMSHJ, "none", {**NPU, "tier": "none", "placement": placement}, [])
    if roll < 0.75:  # no neural processor: ONNX Runtime on the CPU
        reason = rng.choice(("dispatch_unit_absent", "dispatch_not_placed"))
        ran = {**ORT, "tier": "none", "placement": None}
        return dispatch_report(BMSHJ, "none", ran, [{**NPU, "reason": reason}])
    tier = "dispatch_tier_refused"
    if roll < 0.92:  # the integer capability on the interpreter or the GPU kernels
        ran = {**rng.choice((WAIOPS, WGSL)), "tier": "decode-equivalence", "placement": None}
        refused = [{**NPU, "reason": tier}, {**ORT, "reason": tier}]
        return dispatch_report(INT, "decode-equivalence", ran, refused)
    # intent replicate on the float capability: no path may run it
    refused = [
        {**NPU, "reason": tier},
        {**ORT, "reason": tier},
        {**WAIOPS, "reason": "dispatch_arithmetic_mismatch"},
    ]
    return dispatch_report(BMSHJ, "decode-equivalence", None, refused)


#: The columns the rows below fill, in the table's order (``ordinal`` left to its default, 0).
# Seeded reports name no request body: ``request_digest`` stays NULL, as for rows stored before it.
_REPORT_COLUMNS = tuple(
    c.name for c in ReportRow.__table__.columns if c.name not in ("ordinal", "request_digest")
)
_REFUSAL_COLUMNS = tuple(c.name for c in RefusalRow.__table__.columns)


@dataclass(frozen=True)
class _Drawn:
    """One report of the pool rows are drawn from, with the columns derived from it."""

    capability: str
    needed: str
    path: str | None
    tier: str | None
    outcome: str
    placement: tuple[int, ...]
    refused: tuple[tuple[str, str], ...]  # (path, code)
    codes: str  # the roll-ups' key part
    json: str


def _pool(rng: random.Random, size: int = 512) -> list[_Drawn]:
    out = []
    for _ in range(size):
        report = _report(rng)
        ran = report["ran"]
        placement = (ran or {}).get("placement") or {}
        refused = tuple((_path(r), str(r["reason"])) for r in report["refused"])
        out.append(
            _Drawn(
                report["capability"],
                report["needed"],
                _path(ran) if ran else None,
                ran["tier"] if ran else None,
                "decoded" if ran else "refused",
                tuple(int(placement.get(u, 0)) for u in UNITS),
                refused,
                rollups.codes_of(code for _, code in refused),
                json.dumps(report, separators=(",", ":")),
            )
        )
    return out


def _uuid(bits: int) -> str:
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _rows(
    rng: random.Random,
    pool: list[_Drawn],
    start: int,
    times: list[int],
    sink_names: list[str],
    sets: dict[str, list[str]],
    counts: dict[rollups.Key, list[int]],
    acts: dict[tuple[str, str, int], list[int]],
    exact: dict[tuple[str, str, int, str], list[int]],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Rows for reports created at ``times`` (in order), their refusals; each counted into
    ``counts`` (per roll-up key), ``acts`` (per sink, set and hour) and ``exact`` (the exact
    tier's decodes per set, symbols digest, day and sink): the roll-ups' deltas."""
    rows: list[tuple[Any, ...]] = []
    refusals: list[tuple[Any, ...]] = []
    for k, created in enumerate(times):
        seq = start + k
        d = rng.choice(pool)
        sink = rng.choice(sink_names)
        digest = rng.choice(sets[d.capability])
        symbols = f"{rng.getrandbits(256):064x}"
        rows.append(
            (
                seq,
                _uuid(rng.getrandbits(128)),
                _uuid(rng.getrandbits(128)),
                created,
                sink,
                "primary",
                d.capability,
                digest,
                symbols,
                None,
                d.needed,
                d.path,
                d.tier,
                d.outcome,
                round(rng.uniform(20, 400), 3),
                *d.placement,
                d.json,
                "service",
                None,
            )
        )
        refusals += [(seq, i, path, code) for i, (path, code) in enumerate(d.refused)]
        if d.tier == "decode-equivalence":  # no RGB digest, no request digest: ""
            one = exact.get((digest, symbols, rollups.day_of(created), sink))
            if one is None:
                exact[(digest, symbols, rollups.day_of(created), sink)] = [1, created]
            else:
                one[0] += 1
                one[1] = created
        key = rollups.Key(
            sink,
            rollups.hour_of(created),
            d.capability,
            digest,
            d.path or "",
            d.tier or "",
            d.outcome,
            d.codes,
        )
        act = acts.get((sink, digest, key.hour_ms))
        if act is None:
            acts[(sink, digest, key.hour_ms)] = [1, int(d.outcome == "refused"), created]
        else:
            act[0] += 1
            act[1] += d.outcome == "refused"
            act[2] = created  # in time order: the latest
        into = counts.get(key)
        if into is None:
            counts[key] = [1, *d.placement]
        else:
            into[0] += 1
            for i, v in enumerate(d.placement, 1):
                into[i] += v
    return rows, refusals


Rows = list[tuple[Any, ...]]


def _rollup_rows(
    counts: dict[rollups.Key, list[int]],
    acts: dict[tuple[str, str, int], list[int]],
    exact: dict[tuple[str, str, int, str], list[int]],
) -> list[tuple[Table, Rows]]:
    """The deltas of one chunk as each report roll-up's rows (:data:`rollups.TABLES`), in its
    columns' order: what the fold would have added for these reports (every seeded report is
    a decode's first, role ``primary``; none names an RGB or request digest)."""
    fleet: dict[tuple[Any, ...], list[int]] = {}
    for key, sums in counts.items():
        into = fleet.setdefault(key[1:], [0] * len(sums))
        for i, v in enumerate(sums):
            into[i] += v
    set_days: dict[tuple[int, str, str], list[int]] = {}
    pairs: dict[tuple[str, str], int] = {}
    sink_hours: dict[tuple[int, str], list[int]] = {}
    for (sink, digest, hour), (n, no_path, last) in acts.items():
        slot = set_days.setdefault((rollups.day_of(hour), sink, digest), [0, 0, last])
        slot[0] += n
        slot[1] += no_path
        slot[2] = max(slot[2], last)
        pairs[(sink, digest)] = max(last, pairs.get((sink, digest), last))
        hourly = sink_hours.setdefault((hour, sink), [0, 0, 0, last])
        hourly[0] += n
        hourly[1] += no_path
        hourly[2] += n
        hourly[3] = max(hourly[3], last)
    sink_days: dict[tuple[int, str], list[int]] = {}
    for (hour, sink), (n, no_path, decodes, last) in sink_hours.items():
        slot = sink_days.setdefault((rollups.day_of(hour), sink), [0, 0, 0, last])
        slot[0] += n
        slot[1] += no_path
        slot[2] += decodes
        slot[3] = max(slot[3], last)
    groups: dict[tuple[str, str], list[Any]] = {}
    for (digest, symbols, _, _), (n, last) in exact.items():
        slot = groups.setdefault((digest, symbols), [0, last, None, None])
        slot[0] += n
        slot[1] = max(slot[1], last)
    return [
        (rollups.FLEET, [(*k, *v) for k, v in fleet.items()]),
        (rollups.SINK, [(*k, *v) for k, v in counts.items()]),
        (rollups.HOURS, [(h, sink, d, *v) for (sink, d, h), v in acts.items()]),
        (rollups.DAYS, [(*k, *v) for k, v in set_days.items()]),
        (rollups.PAIRS, [(*k, v) for k, v in pairs.items()]),
        (rollups.SINK_HOURS, [(*k, *v) for k, v in sink_hours.items()]),
        (rollups.SINK_DAYS, [(*k, *v) for k, v in sink_days.items()]),
        (
            rollups.EXACT_DAYS,
            [(d, sy, day, "", sink, "", *v) for (d, sy, day, sink), v in exact.items()],
        ),
        (rollups.EXACT_GROUPS, [(*k, *v) for k, v in groups.items()]),
    ]


def _upsert_sql(table: Table, into: str, source: str | None, pg: bool) -> str:
    """``INSERT … ON CONFLICT DO UPDATE`` into ``table`` (named ``into``) of the rows of
    ``source`` (a table; ``None``: one row of bound values): a row whose key is stored adds its
    counts, keeps the later ``last_ms`` and the least and greatest RGB digest."""
    names = [c.name for c in table.c]
    keys = [c.name for c in table.primary_key.columns]
    greatest, least = ("GREATEST", "LEAST") if pg else ("max", "min")
    put = []
    for c in names:
        if c in keys:
            continue
        new, old = f"excluded.{c}", f"{into}.{c}"
        if c == "last_ms":
            put.append(f"{c} = {greatest}({old}, {new})")
        elif c in ("rgb_least", "rgb_greatest"):
            pick = least if c == "rgb_least" else greatest
            put.append(f"{c} = {pick}(coalesce({old}, {new}), coalesce({new}, {old}))")
        else:
            put.append(f"{c} = {old} + {new}")
    rows = f"SELECT * FROM {source}" if source else "VALUES (" + ", ".join("?" * len(names)) + ")"
    return (
        f"INSERT INTO {into} ({', '.join(names)}) {rows} "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(put)}"
    )


def _bulk_insert(
    store: ReportStore,
    rows: list[tuple[Any, ...]],
    refusals: list[Any],
    rolled: list[tuple[Table, Rows]],
) -> None:
    """One transaction of rows through the driver itself: ``COPY … FROM STDIN`` on PostgreSQL
    (psycopg 3; the roll-ups' rows copied into a temporary table, then upserted from it),
    ``executemany`` on SQLite (the roll-ups' rows upserted)."""
    tables = [("reports", _REPORT_COLUMNS, rows), ("report_refusals", _REFUSAL_COLUMNS, refusals)]
    pg = store.dialect == "postgresql"
    if pg:  # reports' unique keys (migration 0017), with each report's seq (0019)
        at = [_REPORT_COLUMNS.index(c) for c in ("id", "request_id", "sink", "created_ms", "seq")]
        keys = [(row[at[0]], row[at[1]], row[at[2]], 0, row[at[3]], row[at[4]]) for row in rows]
        key_columns = ("id", "request_id", "sink", "ordinal", "created_ms", "seq")
        tables.append(("report_keys", key_columns, keys))
    raw = store.engine.raw_connection()
    try:
        cur: Any = raw.cursor()
        if not pg:  # index pages stay in memory across the bulk statements
            cur.execute("PRAGMA cache_size = -262144")
        for table, columns, data in tables:
            names = ", ".join(columns)
            if pg:
                with cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                    for row in data:
                        copy.write_row(row)
            else:
                marks = ", ".join("?" * len(columns))
                cur.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", data)
        for rollup, data in rolled:
            if not data:
                continue
            if pg:
                temp = f"seed_{rollup.name}"
                cur.execute(
                    f"CREATE TEMP TABLE {temp} (LIKE {rollup.name} INCLUDING DEFAULTS) "
                    "ON COMMIT DROP"
                )
                with cur.copy(f"COPY {temp} FROM STDIN") as copy:
                    for row in data:
                        copy.write_row(row)
                cur.execute(_upsert_sql(rollup, rollup.name, temp, pg=True))
            else:
                cur.executemany(_upsert_sql(rollup, rollup.name, None, pg=False), data)
        cur.close()
        raw.commit()
    finally:
        raw.close()


def seed(
    store: ReportStore,
    count: int,
    *,
    sinks: int = 24,
    days: float = 30.0,
    seed_value: int = 1,
    now_ms: int | None = None,
) -> int:
    """Insert ``count`` reports spread over the ``days`` before ``now_ms``, in time order (as
    they would arrive), in bulk (:func:`_bulk_insert`), and count them into the roll-ups
    (:func:`_rollup_rows`, what folding them would have added); returns how many were
    inserted."""
    rng = random.Random(seed_value)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    span = int(days * 86_400_000)
    sink_names = [f"sink-{i:03d}" if sinks <= 1000 else f"sink-{i:05d}" for i in range(sinks)]
    sets = {BMSHJ: [f"{i:x}" * 64 for i in (10, 11)], INT: [f"{i:x}" * 64 for i in (12,)]}
    pool = _pool(rng)
    with store.engine.begin() as conn:
        start = int(conn.execute(select(func.coalesce(func.max(ReportRow.seq), 0))).scalar_one())
    # The secondary indexes are built once after the load, as a bulk loader does, rather than
    # kept up to date row by row (the unique id stays, so a repeated id still fails).
    tables: list[Table] = [ReportRow.__table__, RefusalRow.__table__]  # type: ignore[list-item]
    indexes = [index for table in tables for index in table.indexes]
    if store.dialect == "postgresql":  # reports' unique keys are report_keys' there (0017)
        indexes = [i for i in indexes if not (i.unique and i.table is ReportRow.__table__)]
    with store.engine.begin() as conn:
        for index in indexes:
            index.drop(conn)
    done = 0
    while done < count:
        n = min(CHUNK, count - done)
        # this chunk's slice of the span, times sorted: created in (now - span, now]
        lo, hi = done * span // count, (done + n) * span // count
        times = sorted(now - span + 1 + lo + rng.randrange(max(1, hi - lo)) for _ in range(n))
        counts: dict[rollups.Key, list[int]] = {}
        acts: dict[tuple[str, str, int], list[int]] = {}
        exact: dict[tuple[str, str, int, str], list[int]] = {}
        rows, refusals = _rows(
            rng, pool, start + done + 1, times, sink_names, sets, counts, acts, exact
        )
        _bulk_insert(store, rows, refusals, _rollup_rows(counts, acts, exact))
        done += n
    with store.engine.begin() as conn:
        for index in indexes:
            index.create(conn)
        rollups.rebuild_group_days(conn)  # from the exact tier's groups the chunks added
    if store.dialect == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(
                text(
                    "SELECT setval(pg_get_serial_sequence('reports', 'seq'), "
                    "(SELECT max(seq) FROM reports))"
                )
            )
        # statistics, and the visibility map index-only scans need
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(
                text(
                    "VACUUM ANALYZE reports, report_refusals, report_rollups, "
                    "report_rollups_sink, sink_set_hours, sink_set_days, sink_hours, sink_days, "
                    "exact_days, exact_groups"
                )
            )
    else:
        with store.engine.begin() as conn:  # fresh statistics for the planner
            conn.execute(text("ANALYZE"))
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wai_dispatch.tools.seed_reports")
    parser.add_argument("--count", type=int, default=100_000, help="reports to insert")
    parser.add_argument("--database-url", help="SQLAlchemy URL (default: the data dir's SQLite)")
    parser.add_argument("--data-dir", help="the data directory (default: WAI_DATA_DIR or XDG's)")
    parser.add_argument("--sinks", type=int, default=24)
    parser.add_argument("--days", type=float, default=30.0, help="spread over this many days")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.count < 0 or args.sinks < 1 or args.days <= 0:
        parser.error("--count >= 0, --sinks >= 1 and --days > 0")

    url = load(data_dir=args.data_dir, database_url=args.database_url).url
    store = ReportStore(url)
    store.migrate()
    t0 = time.perf_counter()
    n = seed(store, args.count, sinks=args.sinks, days=args.days, seed_value=args.seed)
    print(f"seeded {n} reports into {store.dialect} in {time.perf_counter() - t0:.1f} s")
    store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
