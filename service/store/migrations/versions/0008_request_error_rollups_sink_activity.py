"""Request errors rolled up (service/store/request_errors.py): ``request_error_rollups`` counts
every 4xx per hour, sink (``""``: no sink's token), code, status and route template, so it cannot
grow with request volume; ``request_error_samples`` counts, per hour and sink, the errors seen
and the rows kept (``request_errors`` keeps rows for sinks only, capped per sink and hour), so
the drops are known. ``request_errors`` gains its route template; ``reports`` an index for the
decodes of one run report, and one sink's by time (``ix_reports_sink_created`` replaces
``ix_reports_sink_seq``), for the dashboard's keyset listing. ``sink_set_hours`` and
``sink_set_days``: per hour and per UTC day, per sink and set, the reports, the no-path ones
and the latest's time, for the fleet tables (service/store/rollups.py), filled from the
reports stored.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from wai_dispatch.service.store.rollups import rebuild_activity

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_error_rollups",
        sa.Column("hour_ms", sa.BigInteger(), nullable=False),
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("route", sa.String(128), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("last_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "hour_ms", "sink", "code", "status", "route", name="pk_request_error_rollups"
        ),
    )
    op.create_index(
        "ix_request_error_rollups_sink_hour", "request_error_rollups", ["sink", "hour_ms"]
    )
    op.create_table(
        "request_error_samples",
        sa.Column("hour_ms", sa.BigInteger(), nullable=False),
        sa.Column("sink", sa.String(128), nullable=False),
        sa.Column("seen", sa.BigInteger(), nullable=False),
        sa.Column("kept", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("hour_ms", "sink", name="pk_request_error_samples"),
    )
    op.add_column("request_errors", sa.Column("route", sa.String(128), nullable=True))
    where = sa.text("run_report IS NOT NULL")  # partial: its statistics are run reports' only
    op.create_index(
        "ix_reports_run_report_seq",
        "reports",
        ["run_report", "seq"],
        sqlite_where=where,
        postgresql_where=where,
    )
    # one sink's reports, newest first by time (the listing's keyset)
    op.create_index("ix_reports_sink_created", "reports", ["sink", "created_ms", "seq"])
    op.drop_index("ix_reports_sink_seq", table_name="reports")
    for name in ("sink_set_hours", "sink_set_days"):
        op.create_table(
            name,
            sa.Column("start_ms", sa.BigInteger(), nullable=False),
            sa.Column("sink", sa.String(128), nullable=False),
            sa.Column("set_digest", sa.String(64), nullable=False),
            sa.Column("n", sa.BigInteger(), nullable=False),
            sa.Column("no_path", sa.BigInteger(), nullable=False),
            sa.Column("last_ms", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint("start_ms", "sink", "set_digest", name=f"pk_{name}"),
        )
        op.create_index(f"ix_{name}_sink_start", name, ["sink", "start_ms"])
    rebuild_activity(op.get_bind())


def downgrade() -> None:
    for name in ("sink_set_days", "sink_set_hours"):
        op.drop_index(f"ix_{name}_sink_start", table_name=name)
        op.drop_table(name)
    op.create_index("ix_reports_sink_seq", "reports", ["sink", "seq"])
    op.drop_index("ix_reports_sink_created", table_name="reports")
    op.drop_index("ix_reports_run_report_seq", table_name="reports")
    op.drop_column("request_errors", "route")
    op.drop_table("request_error_samples")
    op.drop_index("ix_request_error_rollups_sink_hour", table_name="request_error_rollups")
    op.drop_table("request_error_rollups")
