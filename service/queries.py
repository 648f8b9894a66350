"""Reading the report store: filtered, cursor-paged listing, one report, and the dashboard's
summary, every count an SQL aggregate computed in the database."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, exists, func, select
from sqlalchemy.sql.elements import ColumnElement

from wai_dispatch.service.errors import ServiceError
from wai_dispatch.service.models import RefusalRow, ReportRow
from wai_dispatch.service.records import public
from wai_dispatch.service.store import ReportStore

R = ReportRow.__table__.c
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
    row["report"] = json.loads(row["report"])
    return public(row)


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"r{seq}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        if not raw.startswith("r") or not raw[1:].isdigit() or len(raw) > 21:
            raise ValueError
        return int(raw[1:])
    except ValueError:
        raise ServiceError(
            "the cursor is not one this service gave", code="cursor_invalid"
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
        raise ServiceError(f"no report {report_id[:40]!r}", code="report_not_found")
    return _row(row)


def summary(store: ReportStore, filters: Filters, *, bucket_s: int) -> dict[str, Any]:
    """Counts by path and tier, refusals by code, placement share per unit, and counts per
    time bucket (``bucket_s`` seconds, aligned to the Unix epoch)."""
    where = filters.where()
    bucket_ms = bucket_s * 1000
    bucket = (R.created_ms - R.created_ms % bucket_ms).label("bucket")
    n = func.count().label("n")
    with store.engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(ReportRow.__table__).where(*where))
        by_path = conn.execute(
            select(R.path_ran, R.tier, n).where(*where).group_by(R.path_ran, R.tier)
            .order_by(n.desc(), func.coalesce(R.path_ran, ""), func.coalesce(R.tier, ""))
        ).all()  # fmt: skip
        refusals = conn.execute(
            select(F.code, n)
            .select_from(RefusalRow.__table__.join(ReportRow.__table__, F.report_seq == R.seq))
            .where(*where).group_by(F.code).order_by(n.desc(), F.code)
        ).all()  # fmt: skip
        placement = conn.execute(
            select(
                func.coalesce(func.sum(R.placement_npu), 0),
                func.coalesce(func.sum(R.placement_gpu), 0),
                func.coalesce(func.sum(R.placement_cpu), 0),
                func.coalesce(func.sum(R.placement_unknown), 0),
            ).where(*where)
        ).one()
        buckets = conn.execute(
            select(bucket, R.outcome, n).where(*where).group_by(bucket, R.outcome).order_by(bucket)
        ).all()
        total_n = int(total.scalar_one())
    ops = [int(v) for v in placement]
    ops_total = sum(ops)
    over_time: dict[int, dict[str, int]] = {}
    for start, outcome, count in buckets:
        over_time.setdefault(int(start), {})[outcome] = int(count)
    return {
        "reports": total_n,
        "by_path": [{"path": p, "tier": t, "count": int(c)} for p, t, c in by_path],
        "refusals": {code: int(c) for code, c in refusals},
        "placement": {
            unit: (ops[i] / ops_total if ops_total else 0.0)
            for i, unit in enumerate(("npu", "gpu", "cpu", "unknown"))
        },
        "bucket_s": bucket_s,
        "over_time": [{"start_ms": k, **v} for k, v in sorted(over_time.items())],
    }
