"""Run-report ids are unique per sink, not across sinks: two sinks may each use an id, and a
conflict never tells one sink that another used it.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_reports") as batch:
        batch.drop_constraint("uq_run_reports_id", type_="unique")
        batch.create_unique_constraint("uq_run_reports_sink", ["sink", "id"])


def downgrade() -> None:
    with op.batch_alter_table("run_reports") as batch:
        batch.drop_constraint("uq_run_reports_sink", type_="unique")
        batch.create_unique_constraint("uq_run_reports_id", ["id"])
