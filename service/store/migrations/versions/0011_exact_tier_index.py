"""The exact tier's view (``GET /v1/fleet/exact``): a partial covering index of the reports that
ran at ``decode-equivalence`` (a report has a tier only when a path ran): the tier (one value,
but an equality and a range outrank ``ix_reports_tier``'s equality alone for a planner without
statistics, as SQLite's is), time, then what the view groups and counts (set, symbols and RGB
digests, sink, request digest), so a window's integer decodes are read from the index alone;
only those reports are in it, so the other reports' writes never touch it.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

COLUMNS = [
    "tier",
    "created_ms",
    "set_digest",
    "symbols_digest",
    "rgb_digest",
    "sink",
    "request_digest",
]


def upgrade() -> None:
    where = sa.text("tier = 'decode-equivalence'")
    op.create_index(
        "ix_reports_exact", "reports", COLUMNS, sqlite_where=where, postgresql_where=where
    )


def downgrade() -> None:
    op.drop_index("ix_reports_exact", table_name="reports")
