"""The exact tier's roll-ups (service/store/rollups.py), what ``GET /v1/fleet/exact`` reads for a
window of whole days (service/store/fleet.py): ``exact_days``, per set, symbols digest, UTC
day, RGB digest, sink and request digest, the decodes at ``decode-equivalence`` and the latest
one's time; ``exact_groups``, per set and symbols digest, the decodes, the latest one's time
and the least and greatest RGB digest reported, with a partial index of the groups whose
decodes disagree (the least below the greatest) and one by the latest time. Both are filled
here from the stored reports (those still in the inbox are left to the fold) and folded like
every report roll-up from then on.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import fold_all, rebuild_exact

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _digest() -> sa.types.TypeEngine[str]:
    return sa.String(64).with_variant(sa.String(64, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "exact_days",
        sa.Column("set_digest", _digest(), nullable=False),
        sa.Column("symbols_digest", _digest(), nullable=False),
        sa.Column("start_ms", sa.BigInteger(), nullable=False),
        sa.Column("rgb_digest", sa.String(64), nullable=False),
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("request_digest", sa.String(64), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("last_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "set_digest",
            "symbols_digest",
            "start_ms",
            "rgb_digest",
            "sink",
            "request_digest",
            name="pk_exact_days",
        ),
    )
    op.create_index("ix_exact_days_start", "exact_days", ["start_ms"])
    op.create_table(
        "exact_groups",
        sa.Column("set_digest", _digest(), nullable=False),
        sa.Column("symbols_digest", _digest(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("last_ms", sa.BigInteger(), nullable=False),
        sa.Column("rgb_least", sa.String(64), nullable=True),
        sa.Column("rgb_greatest", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("set_digest", "symbols_digest", name="pk_exact_groups"),
    )
    op.create_index("ix_exact_groups_last", "exact_groups", ["last_ms"])
    where = sa.text("rgb_least < rgb_greatest")
    op.create_index(
        "ix_exact_groups_disagree",
        "exact_groups",
        ["set_digest", "symbols_digest"],
        sqlite_where=where,
        postgresql_where=where,
    )
    rebuild_exact(op.get_bind())


def downgrade() -> None:
    # the inbox folded first, into these too: a later downgrade's fold (0015's, 0013's) then
    # finds it empty and writes no table this one drops
    fold_all(op.get_bind())
    op.drop_index("ix_exact_groups_disagree", table_name="exact_groups")
    op.drop_index("ix_exact_groups_last", table_name="exact_groups")
    op.drop_table("exact_groups")
    op.drop_index("ix_exact_days_start", table_name="exact_days")
    op.drop_table("exact_days")
