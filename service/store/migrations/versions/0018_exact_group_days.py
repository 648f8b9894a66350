"""``exact_group_days`` (service/store/models.py): per set and UTC day, the exact tier's groups
whose latest decode is of that day, what ``GET /v1/fleet/exact`` counts a window's groups from
(service/store/fleet.py) instead of a row a group. Filled here from ``exact_groups`` (the
reports still in the inbox are left to the fold, which keeps it from then on). And
``ix_exact_days_sink`` (sink, day): one sink's rows of ``exact_days``, what the exact tier
table filtered by a sink reads.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import fold_all, rebuild_group_days

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "exact_group_days",
        sa.Column(
            "set_digest",
            sa.String(64).with_variant(sa.String(64, collation="C"), "postgresql"),
            nullable=False,
        ),
        sa.Column("start_ms", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("set_digest", "start_ms", name="pk_exact_group_days"),
    )
    rebuild_group_days(op.get_bind())
    op.create_index("ix_exact_days_sink", "exact_days", ["sink", "start_ms"])


def downgrade() -> None:
    # the inbox folded first, into this too: a later downgrade's fold (0016's, 0015's) then
    # finds it empty and writes no table this one drops
    fold_all(op.get_bind())
    op.drop_index("ix_exact_days_sink", table_name="exact_days")
    op.drop_table("exact_group_days")
