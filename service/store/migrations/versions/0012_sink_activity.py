"""Per-sink activity without the set (service/store/rollups.py): ``sink_hours`` and
``sink_days`` count, per hour and per UTC day and per sink, the reports, the no-path ones, the
decodes (a decode's first report, role ``primary``: one a decode, docs/dashboard.md) and the
latest report's time, filled from the reports stored. The sinks table of a window reads a row
a sink and day from them (not a row a sink, set and day), and the decodes per sink class are
counted from them.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import rebuild_sinks

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

NAMES = ("sink_hours", "sink_days")


def upgrade() -> None:
    for name in NAMES:
        op.create_table(
            name,
            sa.Column("start_ms", sa.BigInteger(), nullable=False),
            sa.Column("sink", sa.String(128), nullable=False),
            sa.Column("n", sa.BigInteger(), nullable=False),
            sa.Column("no_path", sa.BigInteger(), nullable=False),
            sa.Column("decodes", sa.BigInteger(), nullable=False),
            sa.Column("last_ms", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint("start_ms", "sink", name=f"pk_{name}"),
        )
        op.create_index(f"ix_{name}_sink_start", name, ["sink", "start_ms"])
    rebuild_sinks(op.get_bind())


def downgrade() -> None:
    for name in reversed(NAMES):
        op.drop_index(f"ix_{name}_sink_start", table_name=name)
        op.drop_table(name)
