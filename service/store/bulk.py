"""Reports into the store in bulk. SQLite: one multi-row ``INSERT … ON CONFLICT DO NOTHING
RETURNING`` for any number of reports (SQLAlchemy's "insertmanyvalues": pages of up to 1,000
rows a statement), one for their refusals, one for their ``report_inbox`` rows (their
``seq``: the aggregator counts them into the roll-ups later, service/store/aggregator.py; the
roll-ups are not written here). PostgreSQL: all of that in one statement of fixed text, one
round trip (service/store/bulk_pg.py).
A decode's reports, a run report's decodes (service/store/policies.py), a group commit's
batch of many requests' reports (service/store/recorder.py) and a spool replay all go
through :func:`insert_records`, inside the caller's transaction.

A report is skipped, not stored again, when its id or its identity ``(sink, request_id,
ordinal)`` is stored already (a spool line replayed twice; a retried request): both are unique
in ``reports`` on SQLite (in ``report_keys`` on PostgreSQL, whose ``reports`` is partitioned
by day: service/store/partitions.py), and ``ON CONFLICT DO NOTHING`` without a target skips a
row that conflicts with either. Only the reports actually inserted go into the inbox, so into
the roll-ups.
:func:`stored_ids` then names, for each report, the id the store holds for its identity, so a
retried request answers with the first decode's report ids."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, insert, select

from wai_dispatch.service.store import bulk_pg, partitions, rollups
from wai_dispatch.service.store.models import InboxRow, RefusalRow, ReportRow
from wai_dispatch.service.store.records import UNITS, ReportRecord
from wai_dispatch.service.store.report_keys import KEYS

__all__ = ["insert_records", "record", "row_of", "stored_ids"]

R = ReportRow.__table__.c
K = KEYS.c


def row_of(rec: ReportRecord) -> dict[str, Any]:
    """The ``reports`` row of ``rec`` (``seq`` left to the database)."""
    row: dict[str, Any] = {k: getattr(rec, k) for k in bulk_pg.PLAIN}
    for unit in UNITS:
        row[f"placement_{unit}"] = rec.placement.get(unit, 0)
    row["report"] = json.dumps(rec.report, separators=(",", ":"))
    return row


def insert_records(
    conn: Connection,
    records: Iterable[ReportRecord],
    rows: Sequence[bulk_pg.Row] | None = None,
    *,
    ready: bool = True,
) -> list[ReportRecord]:
    """Insert ``records`` inside the caller's transaction in one multi-row statement, skipping
    each whose id or identity is stored (or comes earlier in ``records``); their refusals and
    inbox rows go in with them. Returns the records inserted, in their order. On
    PostgreSQL all of it is one statement (service/store/bulk_pg.py; ``rows``: the records'
    :func:`~service.store.bulk_pg.columns`, when made already; ``ready``: today's partitions
    made first, once a day a connection, unless the caller has made them)."""
    records = list(records)
    if not records:
        return []
    if conn.dialect.name == "postgresql":
        if ready:
            partitions.ready(conn, int(time.time() * 1000))  # today's partitions: once a day
        seqs = bulk_pg.insert(conn, records, rows)
        return [rec for rec in records if seqs.pop(rec.id, None) is not None]
    stmt = (
        rollups.upsert_of(conn, ReportRow.__table__).on_conflict_do_nothing().returning(R.seq, R.id)
    )
    seqs = {str(rid): int(seq) for seq, rid in conn.execute(stmt, [row_of(r) for r in records])}
    inserted: list[ReportRecord] = []
    refusals: list[dict[str, Any]] = []
    inbox: list[dict[str, int]] = []
    for rec in records:
        seq = seqs.pop(rec.id, None)  # popped: a record listed twice is inserted once
        if seq is None:
            continue
        inserted.append(rec)
        inbox.append({"seq": seq})
        refusals += [
            {"report_seq": seq, "position": i, "path": r.path, "code": r.code}
            for i, r in enumerate(rec.refusals)
        ]
    if refusals:
        conn.execute(insert(RefusalRow), refusals)
    if inbox:
        conn.execute(insert(InboxRow), inbox)
    return inserted


Identity = tuple[str, str, int]


def stored_ids(conn: Connection, records: Sequence[ReportRecord]) -> dict[Identity, str]:
    """The id the store holds for each identity of ``records`` (those it holds), read from
    their keys (service/store/report_keys.py)."""
    wanted = {r.identity for r in records}
    if not wanted:
        return {}
    query = select(K.sink, K.request_id, K.ordinal, K.id).where(
        K.request_id.in_(sorted({r.request_id for r in records}))
    )
    out: dict[Identity, str] = {}
    for sink, request_id, ordinal, rid in conn.execute(query):
        key = (str(sink), str(request_id), int(ordinal))
        if key in wanted:
            out[key] = str(rid)
    return out


def record(
    conn: Connection,
    records: Sequence[ReportRecord],
    rows: Sequence[bulk_pg.Row] | None = None,
    *,
    ready: bool = True,
) -> list[str]:
    """Insert ``records`` (:func:`insert_records`) and return, for each, the id its identity
    is stored under: its own when it went in, the first decode's when its request was stored
    before."""
    inserted = {r.id for r in insert_records(conn, records, rows, ready=ready)}
    skipped = [r for r in records if r.id not in inserted]
    if not skipped:
        return [r.id for r in records]
    held = stored_ids(conn, skipped)
    return [r.id if r.id in inserted else held.get(r.identity, r.id) for r in records]
