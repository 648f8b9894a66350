"""The report roll-ups off the acknowledgement path: ``report_inbox`` holds the ``seq`` of each
report stored but not yet counted into the roll-ups (service/store/rollups.py), written with
the report, folded in and deleted by the aggregator (service/store/aggregator.py). The
roll-ups count every report stored before this revision, so it starts empty.

Revision ID: 0013
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0011"
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
    from wai_dispatch.service.store.rollups import fold_all

    fold_all(op.get_bind())
    op.drop_table("report_inbox")
