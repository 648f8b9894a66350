"""On PostgreSQL, ``reports`` becomes a table partitioned by range of ``created_ms``, one
partition a UTC day (service/store/partitions.py), so retention drops a day's partition instead
of deleting its rows. SQLite is left as it is.

A partitioned table's unique keys must hold its partition key, so the report id and the
identity move to ``report_keys`` (``id`` its primary key, ``(request_id, sink, ordinal)``
unique, ``created_ms`` to find the report's partition), which the writers insert first
(service/store/bulk_pg.py). On ``reports`` the primary key becomes ``(seq, created_ms)``,
``uq_reports_id`` and ``uq_reports_identity`` become the plain indexes ``ix_reports_id`` and
``ix_reports_identity`` (the same reads use them), and ``report_refusals`` loses its foreign
key to ``reports`` (a foreign key may only reference a unique key holding ``created_ms``):
retention deletes a partition's refusals itself.

The upgrade converts a populated table: the old one renamed, a partition made for each day
its reports have, today's and the next days', and the default partition, the rows and their
keys copied, the old table dropped, the indexes built once over the copied rows. The downgrade
copies them back into one table with the unique keys and the foreign key of revision 0016.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import time

from alembic import op
from sqlalchemy import text

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

DAY_MS = 86_400_000
AHEAD = 3  # service/store/partitions.py's AHEAD, as of this revision
FK = "fk_report_refusals_report_seq_reports"
RUN_WHERE = "WHERE run_report IS NOT NULL"
EXACT_WHERE = "WHERE tier = 'decode-equivalence'"
#: The indexes both shapes share (revision 0014's), as ``(name, columns and predicate)``.
SHARED = (
    ("ix_reports_sink_created", "(sink, created_ms, seq)"),
    ("ix_reports_run_report", f"(run_report, sink, created_ms, seq) {RUN_WHERE}"),
    (
        "ix_reports_exact",
        "(tier, created_ms, set_digest, symbols_digest, rgb_digest, sink, request_digest) "
        + EXACT_WHERE,
    ),
    (
        "ix_reports_summary",
        "(created_ms, outcome, path_ran, tier, sink, capability, set_digest, placement_npu, "
        "placement_gpu, placement_cpu, placement_unknown)",
    ),
)


def _name(day: int) -> str:
    return "reports_d" + time.strftime("%Y%m%d", time.gmtime(day * 86_400))


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    ex = op.execute
    ex(f"ALTER TABLE report_refusals DROP CONSTRAINT {FK}")
    ex("ALTER TABLE reports RENAME TO reports_flat")
    for name, _ in SHARED:
        ex(f"DROP INDEX {name}")
    ex("DROP INDEX uq_reports_identity")
    ex("ALTER TABLE reports_flat DROP CONSTRAINT uq_reports_id")
    ex("ALTER TABLE reports_flat DROP CONSTRAINT pk_reports")
    ex("ALTER SEQUENCE reports_seq_seq OWNED BY NONE")
    ex(
        "CREATE TABLE reports (LIKE reports_flat INCLUDING DEFAULTS) "
        "PARTITION BY RANGE (created_ms)"
    )
    ex("ALTER SEQUENCE reports_seq_seq OWNED BY reports.seq")
    ex("CREATE TABLE reports_default PARTITION OF reports DEFAULT")
    today = int(time.time() * 1000) // DAY_MS
    days = {
        int(d)
        for d in conn.execute(
            text("SELECT DISTINCT created_ms / 86400000 FROM reports_flat")
        ).scalars()
    }
    days |= {today + k for k in range(AHEAD + 1)}
    for day in sorted(days):
        ex(
            f"CREATE TABLE {_name(day)} PARTITION OF reports "
            f"FOR VALUES FROM ({day * DAY_MS}) TO ({(day + 1) * DAY_MS})"
        )
    ex("INSERT INTO reports SELECT * FROM reports_flat")
    ex(
        "CREATE TABLE report_keys (id varchar(36) NOT NULL, request_id varchar(36) NOT NULL, "
        "sink varchar(128) NOT NULL, ordinal integer NOT NULL, created_ms bigint NOT NULL, "
        "CONSTRAINT pk_report_keys PRIMARY KEY (id))"
    )
    ex(
        "INSERT INTO report_keys (id, request_id, sink, ordinal, created_ms) "
        "SELECT id, request_id, sink, ordinal, created_ms FROM reports_flat"
    )
    ex("CREATE UNIQUE INDEX uq_report_keys_identity ON report_keys (request_id, sink, ordinal)")
    ex("DROP TABLE reports_flat")
    ex("ALTER TABLE reports ADD CONSTRAINT pk_reports PRIMARY KEY (seq, created_ms)")
    ex("CREATE INDEX ix_reports_id ON reports (id)")
    ex("CREATE INDEX ix_reports_identity ON reports (request_id, sink, ordinal)")
    for name, spec in SHARED:
        ex(f"CREATE INDEX {name} ON reports {spec}")


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    ex = op.execute
    ex("ALTER TABLE reports RENAME TO reports_parted")
    for name, _ in SHARED:
        ex(f"DROP INDEX {name}")
    ex("DROP INDEX ix_reports_id")
    ex("DROP INDEX ix_reports_identity")
    ex("ALTER TABLE reports_parted DROP CONSTRAINT pk_reports")
    ex("ALTER SEQUENCE reports_seq_seq OWNED BY NONE")
    ex("CREATE TABLE reports (LIKE reports_parted INCLUDING DEFAULTS)")
    ex("ALTER SEQUENCE reports_seq_seq OWNED BY reports.seq")
    ex("INSERT INTO reports SELECT * FROM reports_parted")
    ex("DROP TABLE reports_parted")  # and its partitions
    # day tables a retention pass detached and had not yet dropped: their reports had gone
    left = conn.execute(
        text("SELECT relname FROM pg_class WHERE relkind = 'r' AND relname ~ '^reports_d[0-9]{8}$'")
    ).scalars()
    for name in list(left):
        ex(f"DROP TABLE {name}")
    ex("DROP TABLE report_keys")
    ex("ALTER TABLE reports ADD CONSTRAINT pk_reports PRIMARY KEY (seq)")
    ex("ALTER TABLE reports ADD CONSTRAINT uq_reports_id UNIQUE (id)")
    ex("CREATE UNIQUE INDEX uq_reports_identity ON reports (request_id, sink, ordinal)")
    for name, spec in SHARED:
        ex(f"CREATE INDEX {name} ON reports {spec}")
    ex(  # refusals of a detached day table a pass had not yet cleared
        "DELETE FROM report_refusals f WHERE NOT EXISTS "
        "(SELECT 1 FROM reports r WHERE r.seq = f.report_seq)"
    )
    ex(
        f"ALTER TABLE report_refusals ADD CONSTRAINT {FK} FOREIGN KEY (report_seq) "
        "REFERENCES reports (seq) ON DELETE CASCADE"
    )
