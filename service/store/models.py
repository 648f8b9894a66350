"""The report store's tables (SQLAlchemy 2). Alembic migrations (service/store/migrations/) create
them; this module is their one description, read by queries and by the migration check.

``reports``: one row per dispatch report (a decode has one, or two when its fallback was tried),
with the columns an operator filters and aggregates on indexed; ``source`` says whether the
service decoded it or a fleet sink reported it in a run report (``run_report``, its id); its
identity, ``(sink, request_id, ordinal)``, is unique (one report per request and index).
On PostgreSQL ``reports`` is partitioned by day and its two unique keys are ``report_keys``'
(migration 0017, service/store/partitions.py): this module describes SQLite's shape, and
PostgreSQL's but for those (tests/service/store/test_service_store.py names the difference).
``report_refusals``: one row per refused path of a report, so SQL counts refusals by code.
``report_rollups`` and ``report_rollups_sink``: per-hour counts of reports (by capability, set,
path, tier, outcome and the report's refusal codes; the second also by sink), written in the
transaction that inserts each report (service/store/rollups.py); pruning reports leaves them.
``tokens``: bearer tokens, hashed.
``policies``: every version of the model policy, with who set it and when. ``run_reports``: each
run report a sink submitted (its id unique per sink), as submitted, with the verdict it got
(service/store/policies.py); ``run_report_rollups`` counts them per hour, sink, class and
verdict (service/store/rollups.py). ``sets``, ``set_chunks``, ``set_defaults``: the set
registry every replica shares (service/store/setregistry.py, docs/sets.md).
``request_error_rollups``: every request answered with a 4xx, counted per hour, sink (``""``:
no sink's token), code, status and route template; ``request_errors``: a sample of them, for
sinks only, capped per sink and hour; ``request_error_samples``: per hour and sink, the errors
seen and the rows kept (service/store/request_errors.py). ``sink_hours`` and ``sink_days``:
per hour and per UTC day, per sink (every set together), the reports, the no-path ones, the
decodes (a decode's first report: role ``primary``) and the latest's time
(service/store/rollups.py). ``rollup_horizon``: the first hour the report roll-ups may hold
(service/store/rollups.py, service/store/retention.py). ``exact_days`` and ``exact_groups``:
the exact tier's decodes per set and symbols digest, per day with their RGB digest, sink and
request digest, and every day together with the least and greatest RGB digest
(service/store/rollups.py; what service/store/fleet.py's exact tier table reads);
``exact_group_days``: per set and UTC day, the groups whose latest decode is of that day (the
exact tier table's total).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class ReportRow(Base):
    __tablename__ = "reports"

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    id: Mapped[str] = mapped_column(String(36), unique=True)  # the report id; replays dedupe
    request_id: Mapped[str] = mapped_column(String(36))  # uq_reports_identity's first column
    created_ms: Mapped[int] = mapped_column(BigInteger)  # Unix time, milliseconds
    sink: Mapped[str] = mapped_column(String(128))  # a sink's reports: ix_reports_sink_created
    role: Mapped[str] = mapped_column(String(16))  # primary | fallback
    capability: Mapped[str] = mapped_column(String(128))
    set_digest: Mapped[str | None] = mapped_column(String(64))
    symbols_digest: Mapped[str | None] = mapped_column(String(64))
    rgb_digest: Mapped[str | None] = mapped_column(String(64))
    needed: Mapped[str] = mapped_column(String(32))
    path_ran: Mapped[str | None] = mapped_column(String(64))  # unit/backend/arithmetic
    tier: Mapped[str | None] = mapped_column(String(32))  # the tier that ran
    outcome: Mapped[str] = mapped_column(String(16))  # decoded | refused
    duration_ms: Mapped[float] = mapped_column(Float)
    placement_npu: Mapped[int] = mapped_column(Integer, default=0)
    placement_gpu: Mapped[int] = mapped_column(Integer, default=0)
    placement_cpu: Mapped[int] = mapped_column(Integer, default=0)
    placement_unknown: Mapped[int] = mapped_column(Integer, default=0)
    report: Mapped[str] = mapped_column(Text)  # the wai-neural-dispatch/1 JSON, as emitted
    source: Mapped[str] = mapped_column(  # service | sink (a run report's decode)
        String(8), default="service", server_default="service"
    )
    run_report: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # the report's index within its request (a decode's primary 0, fallback 1; a run
    # report's decode its index): (sink, request_id, ordinal) is the report's identity
    ordinal: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # what the request asked (SHA-256 of a decode's envelope): the same id with another
    # envelope is refused (``None``: a run report's decode, or stored before it was kept)
    request_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)


class RefusalRow(Base):
    __tablename__ = "report_refusals"

    report_seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"),
        ForeignKey("reports.seq", ondelete="CASCADE"),
        primary_key=True,
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    path: Mapped[str] = mapped_column(String(64))
    code: Mapped[str] = mapped_column(String(64), index=True)


# ``reports``' indexes: each one a named read needs, and only those (migration 0014 dropped the
# rest): tests/service/store/test_report_indexes.py runs each read under EXPLAIN on both stores
# and finds its index in the plan. Every index is written with each report stored.
# One sink's reports, newest first (the listing's keyset for a sink; a sink's token sees only its
# own).
Index("ix_reports_sink_created", ReportRow.sink, ReportRow.created_ms, ReportRow.seq)
# A run report's decodes, newest first (the listing's run-report filter, with its sink or
# without): partial, so only a run report's decodes are written to it, and the planners'
# statistics are theirs (over every report, NULLs make it look useless); the run report and its
# sink first, so SQLite prefers it to ix_reports_sink_created for a run report of a sink.
Index(
    "ix_reports_run_report",
    ReportRow.run_report,
    ReportRow.sink,
    ReportRow.created_ms,
    ReportRow.seq,
    sqlite_where=ReportRow.run_report.is_not(None),
    postgresql_where=ReportRow.run_report.is_not(None),
)
# The exact tier's view (fleet.exact_groups) reads only this index: the reports that ran at
# decode-equivalence, tier and time first (migration 0011 says why), then what it groups.
EXACT = text("tier = 'decode-equivalence'")
Index(
    "ix_reports_exact",
    ReportRow.tier,
    ReportRow.created_ms,
    ReportRow.set_digest,
    ReportRow.symbols_digest,
    ReportRow.rgb_digest,
    ReportRow.sink,
    ReportRow.request_digest,
    sqlite_where=EXACT,
    postgresql_where=EXACT,
)
# One report per identity: a retried request (its X-Request-Id sent again) is stored once.
# Request id first: the same index finds a request's reports by id alone (a retry's stored ids,
# bulk.stored_ids; the listing's request-id filter) and by sink and id (ReportStore.asked).
Index("uq_reports_identity", ReportRow.request_id, ReportRow.sink, ReportRow.ordinal, unique=True)
# The dashboard's summary reads only this index: time first, then what it filters and sums; the
# reads by time alone use it too (the listing's keyset, retention's oldest reports, the oldest
# report's time).
Index(
    "ix_reports_summary",
    ReportRow.created_ms,
    ReportRow.outcome,
    ReportRow.path_ran,
    ReportRow.tier,
    ReportRow.sink,
    ReportRow.capability,
    ReportRow.set_digest,
    ReportRow.placement_npu,
    ReportRow.placement_gpu,
    ReportRow.placement_cpu,
    ReportRow.placement_unknown,
)


class _RollupColumns:
    """The key and the sums of a per-hour roll-up. A key part the report lacks is ``""`` (not
    NULL: NULLs never conflict in a unique key, and the upsert needs them to)."""

    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the hour's first ms
    capability: Mapped[str] = mapped_column(String(128), primary_key=True)
    set_digest: Mapped[str] = mapped_column(String(64), primary_key=True)  # "": none
    path: Mapped[str] = mapped_column(String(64), primary_key=True)  # "": no path ran
    tier: Mapped[str] = mapped_column(String(32), primary_key=True)  # "": no path ran
    outcome: Mapped[str] = mapped_column(String(16), primary_key=True)
    codes: Mapped[str] = mapped_column(Text, primary_key=True)  # refusal codes, sorted, " "
    n: Mapped[int] = mapped_column(BigInteger)  # reports
    placement_npu: Mapped[int] = mapped_column(BigInteger)  # sums of the reports' placements
    placement_gpu: Mapped[int] = mapped_column(BigInteger)
    placement_cpu: Mapped[int] = mapped_column(BigInteger)
    placement_unknown: Mapped[int] = mapped_column(BigInteger)


class RollupRow(_RollupColumns, Base):
    """Every sink's reports together: a few rows an hour, however large the fleet."""

    __tablename__ = "report_rollups"


class SinkRollupRow(_RollupColumns, Base):
    """Per sink (the summary's sink and sink-class filters read this one, by sink first)."""

    __tablename__ = "report_rollups_sink"

    sink: Mapped[str] = mapped_column(String(128), primary_key=True, sort_order=-1)
    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True, index=True)


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), index=True)  # the sink, for a sink
    role: Mapped[str] = mapped_column(String(16))
    hash: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 of the secret
    created_ms: Mapped[int] = mapped_column(BigInteger)
    revoked_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class PolicyRow(Base):
    __tablename__ = "policies"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    set_ms: Mapped[int] = mapped_column(BigInteger, index=True)
    set_by: Mapped[str] = mapped_column(String(128))
    sha256: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)


class RunReportRow(Base):
    __tablename__ = "run_reports"

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    __table_args__ = (UniqueConstraint("sink", "id", name="uq_run_reports_sink"),)

    id: Mapped[str] = mapped_column(String(128))  # the sink's id, unique per sink; resubmits dedupe
    sink: Mapped[str] = mapped_column(String(128), index=True)
    sink_class: Mapped[str | None] = mapped_column(String(64), nullable=True)
    received_ms: Mapped[int] = mapped_column(BigInteger, index=True)
    policy_version: Mapped[int] = mapped_column(Integer)
    accepted: Mapped[bool] = mapped_column(Boolean)
    decodes: Mapped[int] = mapped_column(Integer)
    refused_decodes: Mapped[int] = mapped_column(Integer)
    body_sha256: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)  # the run report as submitted
    verdict: Mapped[str] = mapped_column(Text)  # wai-run-verdict/1, every reason


Index("ix_run_reports_class_received", RunReportRow.sink_class, RunReportRow.received_ms)
Index("ix_run_reports_accepted_received", RunReportRow.accepted, RunReportRow.received_ms)


class RunReportRollupRow(Base):
    """Run reports counted per hour, sink, class (``""``: none) and verdict, written with each
    run report (service/store/rollups.py): what the dashboard's run-report counts read."""

    __tablename__ = "run_report_rollups"

    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    sink_class: Mapped[str] = mapped_column(String(64), primary_key=True)  # "": none
    accepted: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)
    last_ms: Mapped[int] = mapped_column(BigInteger)  # the latest run report's receipt


Index("ix_run_report_rollups_sink_hour", RunReportRollupRow.sink, RunReportRollupRow.hour_ms)


class SetRow(Base):
    """One set in the registry every replica shares (service/store/setregistry.py), by its
    BLAKE3 digest; ``removed_ms`` is its tombstone (a removed set stays removed, bundled or
    not, until it is installed again)."""

    __tablename__ = "sets"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    capability: Mapped[str] = mapped_column(String(256))
    version: Mapped[str] = mapped_column(String(64))
    archive_bytes: Mapped[int] = mapped_column(BigInteger)  # the tar's length, all chunks
    chunks: Mapped[int] = mapped_column(Integer)
    bundled: Mapped[bool] = mapped_column(Boolean)
    installed_ms: Mapped[int] = mapped_column(BigInteger)
    removed_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class SetChunkRow(Base):
    """A set's archive (a plain tar of its folder) in chunks of at most 4 MiB, in order."""

    __tablename__ = "set_chunks"

    digest: Mapped[str] = mapped_column(
        String(64), ForeignKey("sets.digest", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class SetDefaultRow(Base):
    """Each capability's default set, as the fleet chose it (``sets default``)."""

    __tablename__ = "set_defaults"

    capability: Mapped[str] = mapped_column(String(256), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64))


class RequestErrorRow(Base):
    """A sink's request answered with a 4xx (service/store/request_errors.py): the sample kept
    (at most the cap of rows per sink and hour), written off the request's path, pruned with
    the reports."""

    __tablename__ = "request_errors"

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    created_ms: Mapped[int] = mapped_column(BigInteger, index=True)
    status: Mapped[int] = mapped_column(Integer)
    code: Mapped[str] = mapped_column(String(64))
    sink: Mapped[str | None] = mapped_column(String(128), nullable=True)  # a sink's token name
    request_id: Mapped[str] = mapped_column(String(36))
    method: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(256))
    route: Mapped[str | None] = mapped_column(String(128), nullable=True)  # the route template


Index("ix_request_errors_sink_created", RequestErrorRow.sink, RequestErrorRow.created_ms)


class RequestErrorRollupRow(Base):
    """Every 4xx, counted: per hour, sink (``""``: no sink's token), code, status and route
    template (``(no route)`` where none matched), so its size is bounded by the codes, routes
    and sinks, never by the requests."""

    __tablename__ = "request_error_rollups"

    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    code: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    route: Mapped[str] = mapped_column(String(128), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)
    last_ms: Mapped[int] = mapped_column(BigInteger)  # the latest error of the key's hour


Index(
    "ix_request_error_rollups_sink_hour", RequestErrorRollupRow.sink, RequestErrorRollupRow.hour_ms
)


class RequestErrorSampleRow(Base):
    """Per hour and sink: the errors seen and the rows of them ``request_errors`` kept."""

    __tablename__ = "request_error_samples"

    hour_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    seen: Mapped[int] = mapped_column(BigInteger)
    kept: Mapped[int] = mapped_column(BigInteger)


class _ActivityColumns:
    """A sink's reports of one set in an hour or a day: what the fleet tables read."""

    start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the hour's or day's
    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    set_digest: Mapped[str] = mapped_column(String(64), primary_key=True)  # "": none
    n: Mapped[int] = mapped_column(BigInteger)  # reports
    no_path: Mapped[int] = mapped_column(BigInteger)  # of them, refused (no path ran)
    last_ms: Mapped[int] = mapped_column(BigInteger)  # the latest report's time


class SinkSetHourRow(_ActivityColumns, Base):
    """Per hour, sink and set (service/store/rollups.py)."""

    __tablename__ = "sink_set_hours"


class SinkSetDayRow(_ActivityColumns, Base):
    """Per day (UTC), sink and set: a month is thirty rows a sink and set."""

    __tablename__ = "sink_set_days"


class SinkSetRow(Base):
    """Per sink and set: its latest report's time (service/store/rollups.py), so the sets
    table counts a set's sinks of a window up to now from a row a pair, not a row a day."""

    __tablename__ = "sink_sets"

    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    set_digest: Mapped[str] = mapped_column(String(64), primary_key=True)  # "": none
    last_ms: Mapped[int] = mapped_column(BigInteger)


Index("ix_sink_set_hours_sink_start", SinkSetHourRow.sink, SinkSetHourRow.start_ms)
Index("ix_sink_set_days_sink_start", SinkSetDayRow.sink, SinkSetDayRow.start_ms)


class _SinkActivityColumns:
    """A sink's reports in an hour or a day, every set together: what the sinks table and the
    decodes per class read (a month is thirty rows a sink, however many sets)."""

    start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the hour's or day's
    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)  # reports
    no_path: Mapped[int] = mapped_column(BigInteger)  # of them, refused (no path ran)
    decodes: Mapped[int] = mapped_column(BigInteger)  # of them, a decode's first (role primary)
    last_ms: Mapped[int] = mapped_column(BigInteger)  # the latest report's time


class SinkHourRow(_SinkActivityColumns, Base):
    """Per hour and sink (service/store/rollups.py)."""

    __tablename__ = "sink_hours"


class SinkDayRow(_SinkActivityColumns, Base):
    """Per day (UTC) and sink."""

    __tablename__ = "sink_days"


Index("ix_sink_hours_sink_start", SinkHourRow.sink, SinkHourRow.start_ms)
Index("ix_sink_days_sink_start", SinkDayRow.sink, SinkDayRow.start_ms)


#: A digest compared in code-point order on both stores (PostgreSQL: ``COLLATE "C"``), so an
#: index on it walks the exact tier's pages in the order they are listed.
_DIGEST = String(64).with_variant(String(64, collation="C"), "postgresql")


class ExactDayRow(Base):
    """The exact tier's decodes per UTC day (service/store/rollups.py): per set, symbols digest,
    RGB digest (``""``: not reported), sink and request digest (``""``: none), the reports that
    ran at ``decode-equivalence`` and the latest one's time; what the exact tier's table counts
    a group's decodes, distinct RGB digests, payloads and sinks of a window from
    (service/store/fleet.py). Its key starts with the group, so a page's groups are read by it."""

    __tablename__ = "exact_days"

    set_digest: Mapped[str] = mapped_column(_DIGEST, primary_key=True)
    symbols_digest: Mapped[str] = mapped_column(_DIGEST, primary_key=True)
    start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the day's first ms
    rgb_digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    sink: Mapped[str] = mapped_column(String(128), primary_key=True)
    request_digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)  # decodes (reports at the exact tier)
    last_ms: Mapped[int] = mapped_column(BigInteger)  # the latest one's time


class ExactGroupRow(Base):
    """The exact tier per set and symbols digest, every day together (service/store/rollups.py):
    its decodes, the latest one's time, and the least and greatest RGB digest reported
    (``None``: none), so a group whose decodes ever disagreed is found at fold time (the least
    below the greatest: ``ix_exact_groups_disagree``), and a window's groups are walked in the
    listing's order (the key) and counted by their latest time (``ix_exact_groups_last``)."""

    __tablename__ = "exact_groups"

    set_digest: Mapped[str] = mapped_column(_DIGEST, primary_key=True)
    symbols_digest: Mapped[str] = mapped_column(_DIGEST, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)
    last_ms: Mapped[int] = mapped_column(BigInteger)
    rgb_least: Mapped[str | None] = mapped_column(String(64), nullable=True)
    rgb_greatest: Mapped[str | None] = mapped_column(String(64), nullable=True)


class ExactGroupDayRow(Base):
    """Per set and UTC day, the groups of ``exact_groups`` whose latest decode is of that day
    (migration 0018): kept by the fold as it moves a group's latest time (service/store/
    rollups.py), so the exact tier table counts a window's groups from a row a set and day, not
    a row a group (service/store/fleet.py). A day with none has no row."""

    __tablename__ = "exact_group_days"

    set_digest: Mapped[str] = mapped_column(_DIGEST, primary_key=True)
    start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the day's first ms
    n: Mapped[int] = mapped_column(BigInteger)  # groups


#: A group whose decodes gave two RGB digests or more (the partial index's own WHERE).
DISAGREE = text("rgb_least < rgb_greatest")
Index("ix_exact_days_start", ExactDayRow.start_ms)
#: One sink's rows of a window (migration 0018): the exact tier table filtered by a sink.
Index("ix_exact_days_sink", ExactDayRow.sink, ExactDayRow.start_ms)
Index("ix_exact_groups_last", ExactGroupRow.last_ms)
Index(
    "ix_exact_groups_disagree",
    ExactGroupRow.set_digest,
    ExactGroupRow.symbols_digest,
    sqlite_where=DISAGREE,
    postgresql_where=DISAGREE,
)


class HorizonRow(Base):
    """The report roll-ups' horizon: the first hour they may hold (service/store/retention.py
    moves it when it prunes roll-ups; 0: none pruned). One row: a fold reads it (``FOR SHARE``
    on PostgreSQL) and counts no report of an hour before it, so a late report never brings a
    pruned hour back (service/store/rollups.py)."""

    __tablename__ = "rollup_horizon"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # 1
    before_ms: Mapped[int] = mapped_column(BigInteger)


class InboxRow(Base):
    """A stored report not yet counted into the report roll-ups (service/store/rollups.py): its
    ``seq``, written in the transaction that inserts the report, deleted in the one that folds
    it in (service/store/aggregator.py). Only the key: nothing else to index or update."""

    __tablename__ = "report_inbox"

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False
    )
