"""Run reports rolled up (service/store/rollups.py): ``run_report_rollups`` counts them per
hour, sink, class and verdict, filled from the run reports stored, so the dashboard's
run-report counts read hours, not rows. ``reports`` loses ``ix_reports_sink``: a sink's reports
are found by ``ix_reports_sink_created`` and ``uq_reports_identity``, both sink first, and each
report stored updates one index fewer. ``sink_sets``: per sink and set, the latest report's
time (service/store/rollups.py), filled from ``sink_set_days``.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import rebuild_runs

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_report_rollups",
        sa.Column("hour_ms", sa.BigInteger(), nullable=False),
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("sink_class", sa.String(64), nullable=False),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("last_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "hour_ms", "sink", "sink_class", "accepted", name="pk_run_report_rollups"
        ),
    )
    op.create_index("ix_run_report_rollups_sink_hour", "run_report_rollups", ["sink", "hour_ms"])
    rebuild_runs(op.get_bind())
    op.drop_index("ix_reports_sink", table_name="reports")
    op.create_table(
        "sink_sets",
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("set_digest", sa.String(64), nullable=False),
        sa.Column("last_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("sink", "set_digest", name="pk_sink_sets"),
    )
    op.execute(
        "INSERT INTO sink_sets (sink, set_digest, last_ms)"
        " SELECT sink, set_digest, max(last_ms) FROM sink_set_days GROUP BY sink, set_digest"
    )


def downgrade() -> None:
    op.drop_table("sink_sets")
    op.create_index("ix_reports_sink", "reports", ["sink"])
    op.drop_index("ix_run_report_rollups_sink_hour", table_name="run_report_rollups")
    op.drop_table("run_report_rollups")
