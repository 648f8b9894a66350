"""``reports`` keeps only the indexes a named read needs (each shown in that read's plan, on both
stores, by tests/service/store/test_report_indexes.py); every report stored writes each index,
so each one dropped is write work saved.

Dropped: the single-column indexes on ``capability``, ``set_digest``, ``path_ran``, ``tier`` and
``outcome`` (no read needs them: the summary's and the fleet tables' reads of reports are
ranges of time, read from ``ix_reports_summary``, which holds every one of those columns;
a filter on one of them alone is a few values over millions of rows, which no planner reads by
index), ``ix_reports_created_ms`` (``ix_reports_summary`` starts with ``created_ms``: the
reads by time alone, the listing's keyset, retention's oldest reports and the oldest report's
time, read that one) and ``ix_reports_request_id`` (``uq_reports_identity`` now starts with
``request_id``: ``(request_id, sink, ordinal)``, still unique, finds a request's reports by its
id alone and by sink and id). ``ix_reports_run_report_seq`` becomes ``ix_reports_run_report``,
``(run_report, sink, created_ms, seq)``, still partial: a run report's decodes in the listing's
order, found by the run report and its sink (SQLite, never analyzed, preferred
``ix_reports_sink_created`` for those over ``(run_report, seq)``, and read the sink's every
report).

Kept: the primary key (``seq``), ``uq_reports_id`` (a report by its id), ``uq_reports_identity``,
``ix_reports_sink_created`` (a sink's reports by time), ``ix_reports_run_report`` and
``ix_reports_exact`` (both partial: only the rows they find are written to them) and
``ix_reports_summary``.

Revision ID: 0014
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: The single-column indexes dropped (0001 made them).
SINGLE = ("request_id", "created_ms", "capability", "set_digest", "path_ran", "tier", "outcome")


RUN_WHERE = sa.text("run_report IS NOT NULL")


def upgrade() -> None:
    for column in SINGLE:
        op.drop_index(f"ix_reports_{column}", table_name="reports")
    op.drop_index("ix_reports_run_report_seq", table_name="reports")
    op.create_index(
        "ix_reports_run_report",
        "reports",
        ["run_report", "sink", "created_ms", "seq"],
        sqlite_where=RUN_WHERE,
        postgresql_where=RUN_WHERE,
    )
    op.drop_index("uq_reports_identity", table_name="reports")
    op.create_index(
        "uq_reports_identity", "reports", ["request_id", "sink", "ordinal"], unique=True
    )


def downgrade() -> None:
    op.drop_index("ix_reports_run_report", table_name="reports")
    op.create_index(
        "ix_reports_run_report_seq",
        "reports",
        ["run_report", "seq"],
        sqlite_where=RUN_WHERE,
        postgresql_where=RUN_WHERE,
    )
    op.drop_index("uq_reports_identity", table_name="reports")
    op.create_index(
        "uq_reports_identity", "reports", ["sink", "request_id", "ordinal"], unique=True
    )
    for column in SINGLE:
        op.create_index(f"ix_reports_{column}", "reports", [column])
