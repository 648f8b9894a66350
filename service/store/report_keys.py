"""``report_keys``: each report's id and identity, and where the report is, read by the reads
that find reports by their keys (a report by its id, a request's reports by its request id).

On PostgreSQL it is a table (migration 0017): the id its primary key and the identity
``(request_id, sink, ordinal)`` unique, exactly-once's two keys (``reports`` is partitioned by
day and holds no unique key), and since migration 0019 the report's ``seq`` beside its
``created_ms``, so a report is found by ``reports``' primary key ``(seq, created_ms)`` and
``reports`` needs no index of its own on the id or the identity (two index entries a report
fewer on the write path). On SQLite, whose ``reports`` keeps both keys unique, it is a view of
``reports`` (migration 0019), so both stores run the same statements: :func:`by_id` and
:func:`by_request` are the conditions on ``reports`` those reads use
(tests/service/store/test_report_indexes.py shows their plans)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, ColumnElement, Integer, MetaData, String, Table, select

from wai_dispatch.service.store.models import ReportRow

__all__ = ["KEYS", "by_id", "by_request"]

#: ``report_keys`` (not among the models: a table on PostgreSQL, a view on SQLite).
KEYS = Table(
    "report_keys",
    MetaData(),
    Column("id", String(36), primary_key=True),
    Column("request_id", String(36), nullable=False),
    Column("sink", String(128), nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("seq", BigInteger),  # NULL only for a key left by a retention pass cut short
)
K = KEYS.c
R = ReportRow.__table__.c


def by_id(report_id: str) -> ColumnElement[bool]:
    """The report whose id is ``report_id``: found by its key."""
    return R.seq.in_(select(K.seq).where(K.id == report_id))


def by_request(request_id: str, sink: str | None = None) -> ColumnElement[bool]:
    """The reports of the request ``request_id`` (of ``sink``, when given): found by their keys
    (the identity's index, request id first)."""
    keys = select(K.seq).where(K.request_id == request_id)
    if sink is not None:
        keys = keys.where(K.sink == sink)
    return R.seq.in_(keys)
