"""Reports into PostgreSQL in one statement, one round trip: the reports as columns (one array a
column, ``unnest``), inserted with ``ON CONFLICT DO NOTHING``, their refusals and their
``report_inbox`` rows (what the aggregator counts into the roll-ups later,
service/store/aggregator.py) from what that insert returned, in data-modifying ``WITH`` parts of
the same statement. What :func:`service.store.bulk.insert_records` does on SQLite in three
statements, with the same rows: a report skipped (its id or identity stored, or earlier in the
batch) adds no refusal and no inbox row.

``reports`` is partitioned by day (service/store/partitions.py), and a partitioned table holds
no unique key without its partition key: the id and the identity are unique in
``report_keys``, whose insert (``ON CONFLICT DO NOTHING``) comes first in the statement; a
report is inserted only when its key went in, so a report sent again is skipped whatever day
it carries. The key holds the report's ``seq`` too (taken from the sequence as the key goes
in), by which the reads find the report (service/store/report_keys.py).

The keys go in by identity order, ``COLLATE "C"`` (code-point order, Python's), so two
transactions that insert the same identity lock it in the same order. The statement's text does
not depend on the number of reports, so psycopg prepares it once a connection and the server
plans it once: a batch of a thousand reports costs the server its rows, not a thousand bound
parameters to parse. The arrays go as binary parameters (``%b``): no array literal is written
and escaped element by element (in text, that was most of a committer's CPU: half the client's
CPU a report at 20 reports a statement, three quarters at 1,000).

:func:`columns` is the part that can run before the batch is formed (the recorder calls it in
the request's own thread, service/store/recorder.py): each report as the tuple the statement
takes, its JSON text made once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from wai_dispatch.service.store.models import ReportRow
from wai_dispatch.service.store.records import UNITS, ReportRecord

__all__ = ["COLS", "PLAIN", "Row", "columns", "insert"]

#: A report as the statement takes it: :data:`COLS` in order.
Row = tuple[Any, ...]

#: The columns of ``reports`` a record carries as they are (the others are derived).
PLAIN = [
    c.name
    for c in ReportRow.__table__.columns
    if c.name not in ("seq", "report") and not c.name.startswith("placement_")
]
_TYPES = {"created_ms": "bigint", "duration_ms": "double precision", "ordinal": "integer"}
#: The columns of ``reports`` a report is written with, and their PostgreSQL types.
COLS = [
    *((c, _TYPES.get(c, "text")) for c in PLAIN),
    *((f"placement_{u}", "integer") for u in UNITS),
    ("report", "text"),
]
_NAMES = ", ".join(c for c, _ in COLS)

SQL = f"""
WITH src AS (
  SELECT * FROM unnest({", ".join(f"%b::{t}[]" for _, t in COLS)})
    WITH ORDINALITY AS s({_NAMES}, at)
), keys AS (
  INSERT INTO report_keys (id, request_id, sink, ordinal, created_ms, seq)
  SELECT id, request_id, sink, ordinal, created_ms, nextval('reports_seq_seq') FROM src
  ORDER BY sink COLLATE "C", request_id COLLATE "C", ordinal, at  -- a twin: the first
  ON CONFLICT DO NOTHING
  RETURNING id, seq
), ins AS (
  INSERT INTO reports (seq, {_NAMES}) SELECT seq, {_NAMES} FROM src JOIN keys USING (id)
  RETURNING seq, id
), refusals AS (
  INSERT INTO report_refusals (report_seq, position, path, code)
  SELECT ins.seq, f.position, f.path, f.code
  FROM unnest(%b::text[], %b::integer[], %b::text[], %b::text[]) AS f(id, position, path, code)
  JOIN ins USING (id)
), inbox AS (
  INSERT INTO report_inbox (seq) SELECT seq FROM ins
)
SELECT seq, id FROM ins
"""


def columns(records: Sequence[ReportRecord]) -> list[Row]:
    """Each of ``records`` as the statement's row (its JSON text made here, once)."""
    return [
        (
            *(getattr(rec, c) for c in PLAIN),
            *(rec.placement.get(u, 0) for u in UNITS),
            json.dumps(rec.report, separators=(",", ":")),
        )
        for rec in records
    ]


def insert(
    conn: Connection, records: Sequence[ReportRecord], rows: Sequence[Row] | None = None
) -> dict[str, int]:
    """Insert ``records`` (``rows``: their :func:`columns`, when made already) with their
    refusals and inbox rows, skipping each whose id or identity is stored or earlier in
    ``records``; returns the ``seq`` of each id inserted."""
    if rows is None:
        rows = columns(records)
    seen: set[str] = set()
    keep = []
    ids: list[str] = []
    positions: list[int] = []
    paths: list[str] = []
    codes: list[str] = []
    for rec, row in zip(records, rows, strict=True):
        if rec.id in seen:  # a record listed twice: its first (the join by id counts it once)
            continue
        seen.add(rec.id)
        keep.append(row)
        for i, r in enumerate(rec.refusals):
            ids.append(rec.id)
            positions.append(i)
            paths.append(r.path)
            codes.append(r.code)
    arrays = [list(col) for col in zip(*keep, strict=True)]
    got = conn.exec_driver_sql(SQL, (*arrays, ids, positions, paths, codes))
    return {str(rid): int(seq) for seq, rid in got}
