"""The set registry every replica shares: ``sets`` (one row per set, by digest, with its
tombstone), ``set_chunks`` (each set's archive in chunks) and ``set_defaults``.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sets",
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("capability", sa.String(256), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("archive_bytes", sa.BigInteger(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("bundled", sa.Boolean(), nullable=False),
        sa.Column("installed_ms", sa.BigInteger(), nullable=False),
        sa.Column("removed_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_sets")),
    )
    op.create_table(
        "set_chunks",
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["digest"],
            ["sets.digest"],
            name=op.f("fk_set_chunks_digest_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("digest", "seq", name=op.f("pk_set_chunks")),
    )
    op.create_table(
        "set_defaults",
        sa.Column("capability", sa.String(256), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("capability", name=op.f("pk_set_defaults")),
    )


def downgrade() -> None:
    op.drop_table("set_defaults")
    op.drop_table("set_chunks")
    op.drop_table("sets")
