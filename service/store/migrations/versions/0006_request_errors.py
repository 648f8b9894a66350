"""``request_errors``: every request answered with a 4xx (code, status, the sink when its token
was known, request id, method, path, time), for the dashboard; pruned with the reports.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "request_errors",
        sa.Column("seq", SEQ, nullable=False, autoincrement=True),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("sink", sa.String(128), nullable=True),
        sa.Column("request_id", sa.String(36), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("path", sa.String(256), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_request_errors")),
    )
    op.create_index(
        op.f("ix_request_errors_created_ms"), "request_errors", ["created_ms"], unique=False
    )
    op.create_index(
        "ix_request_errors_sink_created", "request_errors", ["sink", "created_ms"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_request_errors_sink_created", table_name="request_errors")
    op.drop_index(op.f("ix_request_errors_created_ms"), table_name="request_errors")
    op.drop_table("request_errors")
