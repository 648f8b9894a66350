"""A report's identity: ``reports.ordinal`` (its index within its request: a decode's primary 0
and fallback 1, a run report's decode its index) and one report per ``(sink, request_id,
ordinal)``, a unique index the inserts skip a duplicate of. Rows stored before are numbered
within their request in the order they were stored (a request stored twice keeps both rows,
numbered on), so the index holds on any store.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reports", sa.Column("ordinal", sa.Integer(), server_default="0", nullable=False))
    # Each earlier row's index among its request's rows, by seq (UPDATE … FROM: PostgreSQL,
    # SQLite 3.33+).
    op.execute(
        "UPDATE reports SET ordinal = numbered.n FROM ("
        " SELECT seq, ROW_NUMBER() OVER (PARTITION BY sink, request_id ORDER BY seq) - 1 AS n"
        " FROM reports) AS numbered"
        " WHERE reports.seq = numbered.seq AND numbered.n > 0"
    )
    op.create_index(
        "uq_reports_identity", "reports", ["sink", "request_id", "ordinal"], unique=True
    )


def downgrade() -> None:
    op.drop_index("uq_reports_identity", table_name="reports")
    # ALTER TABLE … DROP COLUMN in place (SQLite 3.35+): a batch rebuild of ``reports`` would
    # drop the table, and its refusals with it (ON DELETE CASCADE)
    op.drop_column("reports", "ordinal")
