"""Reports found by their keys, not by indexes of ``reports``: on PostgreSQL ``report_keys``
gains each report's ``seq`` (filled from ``reports``), and ``reports`` loses ``ix_reports_id``
and ``ix_reports_identity``, which the reads by id and by request id no longer use: they read
``report_keys`` and then ``reports`` by its primary key (service/store/report_keys.py). Each
report stored writes two index entries fewer. On SQLite, whose ``reports`` keeps its unique
id and identity (exactly-once's keys there), ``report_keys`` is made a view of ``reports``, so
both stores run the same reads.

The downgrade builds the two indexes again and drops the column (PostgreSQL), or the view
(SQLite).

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

VIEW = (
    "CREATE VIEW report_keys AS SELECT id, request_id, sink, ordinal, created_ms, seq FROM reports"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.execute(VIEW)
        return
    ex = op.execute
    ex("ALTER TABLE report_keys ADD COLUMN seq bigint")
    # by the id's index, before it goes; a key whose report a retention pass cut short had
    # already detached keeps NULL (no read finds it, as none finds its report)
    ex(
        "UPDATE report_keys k SET seq = r.seq FROM reports r "
        "WHERE r.id = k.id AND r.created_ms = k.created_ms"
    )
    ex("DROP INDEX ix_reports_id")
    ex("DROP INDEX ix_reports_identity")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.execute("DROP VIEW report_keys")
        return
    ex = op.execute
    ex("CREATE INDEX ix_reports_id ON reports (id)")
    ex("CREATE INDEX ix_reports_identity ON reports (request_id, sink, ordinal)")
    ex("ALTER TABLE report_keys DROP COLUMN seq")
