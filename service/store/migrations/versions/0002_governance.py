"""Fleet governance: the model policy's versions, the run reports sinks submit, and the
``source`` and ``run_report`` of each stored report (a sink-reported decode names its run report);
the summary's covering index.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SUMMARY_COLUMNS = (
    "created_ms",
    "outcome",
    "path_ran",
    "tier",
    "sink",
    "capability",
    "set_digest",
    "placement_npu",
    "placement_gpu",
    "placement_cpu",
    "placement_unknown",
)
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("reports") as batch:
        batch.add_column(
            sa.Column("source", sa.String(8), nullable=False, server_default="service")
        )
        batch.add_column(sa.Column("run_report", sa.String(128), nullable=True))
    # The dashboard's summary reads only this index (service/store/reports.py summary()).
    op.create_index("ix_reports_summary", "reports", list(SUMMARY_COLUMNS))
    op.create_table(
        "policies",
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("set_ms", sa.BigInteger(), nullable=False),
        sa.Column("set_by", sa.String(128), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("version", name="pk_policies"),
    )
    op.create_index("ix_policies_set_ms", "policies", ["set_ms"])
    op.create_table(
        "run_reports",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("sink_class", sa.String(64), nullable=True),
        sa.Column("received_ms", sa.BigInteger(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        sa.Column("decodes", sa.Integer(), nullable=False),
        sa.Column("refused_decodes", sa.Integer(), nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_run_reports"),
        sa.UniqueConstraint("id", name="uq_run_reports_id"),
    )
    op.create_index("ix_run_reports_sink", "run_reports", ["sink"])
    op.create_index("ix_run_reports_received_ms", "run_reports", ["received_ms"])
    op.create_index("ix_run_reports_class_received", "run_reports", ["sink_class", "received_ms"])
    op.create_index("ix_run_reports_accepted_received", "run_reports", ["accepted", "received_ms"])


def downgrade() -> None:
    op.drop_table("run_reports")
    op.drop_table("policies")
    op.drop_index("ix_reports_summary", "reports")
    with op.batch_alter_table("reports") as batch:
        batch.drop_column("run_report")
        batch.drop_column("source")
