"""The report roll-ups' horizon (service/store/rollups.py).

``rollup_horizon``: one row, the first hour the report roll-ups may hold, 0 here (none
pruned); retention moves it forward in the transaction that prunes roll-ups
(service/store/retention.py), and no fold, rebuild or read of the inbox counts a report of an
hour before it, so a report that arrives after its hour's roll-ups were pruned brings no row of
that hour back.

The downgrade folds the inbox first, under the horizon (a report it holds of a pruned hour is
then counted in no roll-up, as it would have been).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import fold_all

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    horizon = op.create_table(
        "rollup_horizon",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("before_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_rollup_horizon"),
    )
    op.bulk_insert(horizon, [{"id": 1, "before_ms": 0}])


def downgrade() -> None:
    fold_all(op.get_bind())
    op.drop_table("rollup_horizon")
