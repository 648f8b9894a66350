"""Reading the report store: filtered, cursor-paged listing, one report, and the dashboard's
summary, every count an SQL aggregate computed in the database."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, exists, func, select
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.service.store.db import ReportStore
from wai_dispatch.service.store.errors import StoreError
from wai_dispatch.service.store.models import RefusalRow, ReportRow
from wai_dispatch.service.store.records import ReportRecord

R = ReportRow.__table__.c
MAX_SEQ = 2**63 - 1  # a BIGINT
F = RefusalRow.__table__.c


@dataclass(frozen=True)
class Filters:
    """What a listing or summary is restricted to; ``None`` is no restriction."""

    capability: str | None = None
    path: str | None = None  # unit/backend/arithmetic that ran, or "none"
    reason: str | None = None  # a refusal code any path of the report was refused with
    tier: str | None = None
    sink: str | None = None
    set: str | None = None
    outcome: str | None = None
    request_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    sinks: tuple[str, ...] | None = None  # a sink class's sinks (the policy in force)

    def where(self) -> list[ColumnElement[bool]]:
        out: list[ColumnElement[bool]] = []
        for column, value in (
            (R.capability, self.capability),
            (R.tier, self.tier),
            (R.sink, self.sink),
            (R.set_digest, self.set),
            (R.outcome, self.outcome),
            (R.request_id, self.request_id),
        ):
            if value is not None:
                out.append(column == value)
        if self.path is not None:
            out.append(R.path_ran.is_(None) if self.path == "none" else R.path_ran == self.path)
        if self.reason is not None:
            rf = RefusalRow.__table__.alias("rf")  # its own alias: the summary joins F too
            out.append(exists().where(and_(rf.c.report_seq == R.seq, rf.c.code == self.reason)))
        if self.since_ms is not None:
            out.append(R.created_ms >= self.since_ms)
        if self.until_ms is not None:
            out.append(R.created_ms < self.until_ms)
        if self.sinks is not None:
            out.append(R.sink.in_(self.sinks))
        return out


def _row(m: Any) -> dict[str, Any]:
    row = dict(m)
    row["report"] = strictjson.loads(row["report"])
    return ReportRecord.public(row)


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"r{seq}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        digits = raw[1:]
        if not raw.startswith("r") or not (digits.isascii() and digits.isdigit()):
            raise ValueError
        if len(digits) > 19 or int(digits) > MAX_SEQ:
            raise ValueError  # past the column's int64: no cursor of ours
        return int(digits)
    except ValueError:
        raise StoreError(
            "the cursor is not one this service gave", code=ErrorCode.CURSOR_INVALID
        ) from None


def list_reports(
    store: ReportStore, filters: Filters, *, limit: int, cursor: str | None
) -> dict[str, Any]:
    """Newest first; ``next`` is the cursor of the following page, ``None`` on the last."""
    query: Select[Any] = select(ReportRow.__table__).where(*filters.where())
    if cursor is not None:
        query = query.where(R.seq < decode_cursor(cursor))
    query = query.order_by(R.seq.desc()).limit(limit + 1)
    with store.engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    page = rows[:limit]
    more = len(rows) > limit
    return {
        "items": [_row(r) for r in page],
        "next": encode_cursor(page[-1]["seq"]) if more and page else None,
    }


def get_report(store: ReportStore, report_id: str, sink: str | None) -> dict[str, Any]:
    query = select(ReportRow.__table__).where(R.id == report_id)
    if sink is not None:
        query = query.where(R.sink == sink)
    with store.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    if row is None:
        raise StoreError(f"no report {report_id[:40]!r}", code=ErrorCode.REPORT_NOT_FOUND)
    return _row(row)


def summary(store: ReportStore, filters: Filters, *, bucket_s: int) -> dict[str, Any]:
    """Counts by path and tier, refusals by code, placement share per unit, and counts per
    time bucket (``bucket_s`` seconds, aligned to the Unix epoch).

    Three statements, each an aggregate read from ``ix_reports_summary`` (time first, then every
    column the summary filters or sums, so no table row is read). Grouping by time first keeps
    the planner on that index: grouped by path alone, SQLite would walk ``ix_reports_path_ran``
    over the whole table to skip a sort. Refusals are counted for the reports the filters select
    (``IN`` a sub-select), found by the refusals' primary key."""
    where = filters.where()
    bucket_ms = bucket_s * 1000
    bucket = (R.created_ms - R.created_ms % bucket_ms).label("bucket")
    n = func.count().label("n")
    units = ("npu", "gpu", "cpu", "unknown")
    sums = [func.sum(R[f"placement_{u}"]).label(u) for u in units]
    per_path = (
        select(bucket, R.path_ran, R.tier, n).where(*where)
        .group_by(bucket, R.path_ran, R.tier).subquery()
    )  # fmt: skip
    total_n = func.sum(per_path.c.n).label("n")
    selected = select(R.seq).where(*where)
    with store.engine.connect() as conn:
        buckets = conn.execute(
            select(bucket, R.outcome, n, *sums).where(*where)
            .group_by(bucket, R.outcome).order_by(bucket)
        ).all()  # fmt: skip
        by_path = conn.execute(
            select(per_path.c.path_ran, per_path.c.tier, total_n)
            .group_by(per_path.c.path_ran, per_path.c.tier)
            .order_by(total_n.desc(), func.coalesce(per_path.c.path_ran, ""),
                      func.coalesce(per_path.c.tier, ""))
        ).all()  # fmt: skip
        refusals = conn.execute(
            select(F.code, n).where(F.report_seq.in_(selected))
            .group_by(F.code).order_by(n.desc(), F.code)
        ).all()  # fmt: skip
    # What follows adds up the buckets' aggregates (at most one per bucket and outcome).
    ops = [sum(int(getattr(b, u) or 0) for b in buckets) for u in units]
    ops_total = sum(ops)
    over_time: dict[int, dict[str, int]] = {}
    for b in buckets:
        over_time.setdefault(int(b.bucket), {})[b.outcome] = int(b.n)
    return {
        "reports": sum(int(b.n) for b in buckets),
        "by_path": [{"path": p, "tier": t, "count": int(c)} for p, t, c in by_path],
        "refusals": {code: int(c) for code, c in refusals},
        "placement": {
            unit: (ops[i] / ops_total if ops_total else 0.0) for i, unit in enumerate(units)
        },
        "bucket_s": bucket_s,
        "over_time": [{"start_ms": k, **v} for k, v in sorted(over_time.items())],
    }
