"""What a request asked: ``reports.request_digest``, the SHA-256 of a decode's envelope (its
media type and bytes), the same on each of its reports. A request id sent again with another
envelope is refused by it (docs/service.md, "Request ids"); rows stored before have none and
any envelope retries them.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("reports", sa.Column("request_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("reports", "request_digest")  # in place, as 0007's downgrade
