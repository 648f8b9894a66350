"""Per-hour roll-ups of the reports, for the whole fleet and per sink (service/store/rollups.py),
filled from the reports already stored. (Pruning reports reads ``ix_reports_created_ms``, there
since 0001.)

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import rebuild

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_KEY = ("hour_ms", "capability", "set_digest", "path", "tier", "outcome", "codes")


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("hour_ms", sa.BigInteger(), nullable=False),
        sa.Column("capability", sa.String(128), nullable=False),
        sa.Column("set_digest", sa.String(64), nullable=False),
        sa.Column("path", sa.String(64), nullable=False),
        sa.Column("tier", sa.String(32), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("codes", sa.Text(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("placement_npu", sa.BigInteger(), nullable=False),
        sa.Column("placement_gpu", sa.BigInteger(), nullable=False),
        sa.Column("placement_cpu", sa.BigInteger(), nullable=False),
        sa.Column("placement_unknown", sa.BigInteger(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "report_rollups",
        *_columns(),
        sa.PrimaryKeyConstraint(*_KEY, name="pk_report_rollups"),
    )
    op.create_table(
        "report_rollups_sink",
        sa.Column("sink", sa.String(128), nullable=False),
        *_columns(),
        sa.PrimaryKeyConstraint("sink", *_KEY, name="pk_report_rollups_sink"),
    )
    op.create_index("ix_report_rollups_sink_hour_ms", "report_rollups_sink", ["hour_ms"])
    rebuild(op.get_bind())


def downgrade() -> None:
    op.drop_table("report_rollups_sink")
    op.drop_table("report_rollups")
