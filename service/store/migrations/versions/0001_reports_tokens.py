"""The report store: reports, their refusals, and bearer tokens.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "reports",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("request_id", sa.String(36), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("capability", sa.String(128), nullable=False),
        sa.Column("set_digest", sa.String(64), nullable=True),
        sa.Column("symbols_digest", sa.String(64), nullable=True),
        sa.Column("rgb_digest", sa.String(64), nullable=True),
        sa.Column("needed", sa.String(32), nullable=False),
        sa.Column("path_ran", sa.String(64), nullable=True),
        sa.Column("tier", sa.String(32), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("placement_npu", sa.Integer(), nullable=False),
        sa.Column("placement_gpu", sa.Integer(), nullable=False),
        sa.Column("placement_cpu", sa.Integer(), nullable=False),
        sa.Column("placement_unknown", sa.Integer(), nullable=False),
        sa.Column("report", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_reports"),
        sa.UniqueConstraint("id", name="uq_reports_id"),
    )
    for column in ("request_id", "created_ms", "sink", "capability", "set_digest", "path_ran"):
        op.create_index(f"ix_reports_{column}", "reports", [column])
    op.create_index("ix_reports_tier", "reports", ["tier"])
    op.create_index("ix_reports_outcome", "reports", ["outcome"])
    op.create_index("ix_reports_sink_seq", "reports", ["sink", "seq"])
    op.create_table(
        "report_refusals",
        sa.Column("report_seq", _SEQ, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(64), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["report_seq"],
            ["reports.seq"],
            name="fk_report_refusals_report_seq_reports",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("report_seq", "position", name="pk_report_refusals"),
    )
    op.create_index("ix_report_refusals_code", "report_refusals", ["code"])
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("revoked_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("hash", name="uq_tokens_hash"),
    )
    op.create_index("ix_tokens_name", "tokens", ["name"])


def downgrade() -> None:
    op.drop_table("tokens")
    op.drop_table("report_refusals")
    op.drop_table("reports")
