"""The report roll-ups off the acknowledgement path: ``report_inbox`` holds the ``seq`` of each
report stored but not yet counted into the roll-ups (service/store/rollups.py), written with
the report, folded in and deleted by the aggregator (service/store/aggregator.py). The
roll-ups (``sink_hours`` and ``sink_days`` of 0012 among them, filled from the reports by its
rebuild) count every report stored before this revision, so it starts empty; the downgrade
folds what it holds into every roll-up first.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import fold_all

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "report_inbox",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_report_inbox"),
    )


def downgrade() -> None:
    # what the inbox still holds is counted first: the roll-ups then count every report again
    fold_all(op.get_bind())
    op.drop_table("report_inbox")
