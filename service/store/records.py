"""The one report record: a decode's dispatch report as the store keeps it, whether the service
decoded it (``source="service"``) or a fleet sink reported it in a run report (``"sink"``).

:meth:`ReportRecord.of` derives the columns an operator filters on (the path that ran, its tier,
the outcome, the placement, the refusals) from a report's JSON form: a decode's, made once from
the core's typed ``dispatch.Report`` (:func:`records_for`), or one a sink sent in a run report.
The decode use case, the governance store, the spool and the API all use this type. Its JSON
form (:meth:`~ReportRecord.to_json`) is what the spool writes, one list of records per line.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from wai_dispatch.dispatch import Report

__all__ = ["Outcome", "RecordedRefusal", "ReportRecord", "Role", "Source", "path_of", "records_for"]

Role = Literal["primary", "fallback"]
Outcome = Literal["decoded", "refused"]
Source = Literal["service", "sink"]
UNITS = ("npu", "gpu", "cpu", "unknown")


def path_of(obj: Mapping[str, Any]) -> str:
    """``unit/backend/arithmetic`` of a report's ``ran`` or refused member."""
    return f"{obj['unit']}/{obj['backend']}/{obj['arithmetic']}"


def request_digest(fmt: str | None, body: bytes) -> str:
    """What a decode asks, as its reports keep it: the SHA-256 of its media type and body."""
    return hashlib.sha256(f"{fmt}\n".encode() + body).hexdigest()


@dataclass(frozen=True)
class RecordedRefusal:
    """A stored report's refusal: the path and its §7 code as text (``dispatch.Refusal``'s)."""

    path: str
    code: str


@dataclass(frozen=True)
class ReportRecord:
    id: str
    request_id: str
    created_ms: int
    sink: str
    role: Role
    capability: str
    set_digest: str | None
    symbols_digest: str | None
    rgb_digest: str | None
    needed: str
    path_ran: str | None
    tier: str | None
    outcome: Outcome
    duration_ms: float
    placement: dict[str, int]
    refusals: tuple[RecordedRefusal, ...]
    report: dict[str, Any] = field(repr=False)
    source: Source = "service"
    run_report: str | None = None
    #: The report's index within its request: a decode's primary 0 and fallback 1, a run
    #: report's decode its index in the run report. With ``sink`` and ``request_id``, the
    #: report's identity: the store keeps one report per identity (a retried request's
    #: reports are not stored again).
    ordinal: int = 0
    #: The SHA-256 of what the request asked (a decode's envelope; ``None``: not kept): the
    #: same identity with another digest is another request, refused.
    request_digest: str | None = None

    @property
    def identity(self) -> tuple[str, str, int]:
        """``(sink, request_id, ordinal)``: what the store keeps one report of."""
        return (self.sink, self.request_id, self.ordinal)

    @classmethod
    def of(
        cls,
        report: Mapping[str, Any],
        *,
        id: str,
        request_id: str,
        created_ms: int,
        sink: str,
        role: Role,
        set_digest: str | None,
        symbols_digest: str | None,
        rgb_digest: str | None,
        duration_ms: float,
        source: Source = "service",
        run_report: str | None = None,
        ordinal: int = 0,
        request_digest: str | None = None,
    ) -> ReportRecord:
        """The record of ``report`` (its JSON form, kept as it is); the RGB digest is kept only
        when a path ran."""
        ran = report.get("ran")
        placement = (ran or {}).get("placement") or {}
        return cls(
            id=id,
            request_id=request_id,
            created_ms=created_ms,
            sink=sink,
            role=role,
            capability=str(report["capability"]),
            set_digest=set_digest,
            symbols_digest=symbols_digest,
            rgb_digest=rgb_digest if ran else None,
            needed=str(report["needed"]),
            path_ran=path_of(ran) if ran else None,
            tier=str(ran["tier"]) if ran else None,
            outcome="decoded" if ran else "refused",
            duration_ms=round(duration_ms, 3),
            placement={unit: int(placement.get(unit, 0)) for unit in UNITS} if ran else {},
            refusals=tuple(
                RecordedRefusal(path_of(r), str(r["reason"])) for r in report["refused"]
            ),
            report=dict(report),
            source=source,
            run_report=run_report,
            ordinal=ordinal,
            request_digest=request_digest,
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (the spool's line form)."""
        out = asdict(self)
        out["refusals"] = [asdict(r) for r in self.refusals]
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ReportRecord:
        """A record from :meth:`to_json`'s form (a spool line; lines written before ``source``
        and ``run_report`` existed read as the service's own, and before ``ordinal`` existed
        as a decode's: 0 for its primary, 1 for its fallback)."""
        values = dict(obj)
        values["refusals"] = tuple(RecordedRefusal(**r) for r in values.get("refusals", ()))
        values["placement"] = {k: int(v) for k, v in (values.get("placement") or {}).items()}
        values.setdefault("source", "service")
        values.setdefault("run_report", None)
        values.setdefault("ordinal", 0 if values.get("role", "primary") == "primary" else 1)
        return cls(**values)

    @staticmethod
    def public(row: Mapping[str, Any]) -> dict[str, Any]:
        """A stored row (the ``reports`` table's columns, ``report`` parsed) as the API and
        the dashboard show it."""
        return {
            "id": row["id"],
            "request_id": row["request_id"],
            "time_ms": row["created_ms"],
            "sink": row["sink"],
            "role": row["role"],
            "capability": row["capability"],
            "set": row["set_digest"],
            "symbols_digest": row["symbols_digest"],
            "rgb_digest": row["rgb_digest"],
            "path": row["path_ran"],
            "tier": row["tier"],
            "outcome": row["outcome"],
            "duration_ms": row["duration_ms"],
            "report": row["report"],
            "source": row.get("source", "service"),  # or "sink": from a run report
            "run_report": row.get("run_report"),
        }


def records_for(
    reports: list[Report],
    *,
    request_id: str,
    sink: str,
    set_digests: list[str | None],
    symbols_digests: list[str | None],
    rgb_digest: str | None,
    duration_ms: float,
    request_digest: str | None = None,
) -> list[ReportRecord]:
    """The records of one decode's reports, in the order tried (primary first, its ordinal
    0), each with a fresh id and the digest of what the request asked. ``set_digests`` and
    ``symbols_digests`` are per report (``None`` where the part had none); the RGB digest goes on
    the report whose path ran."""
    now = int(time.time() * 1000)
    return [
        ReportRecord.of(
            report.to_json(),
            id=str(uuid.uuid4()),
            request_id=request_id,
            created_ms=now,
            sink=sink,
            role="primary" if i == 0 else "fallback",
            set_digest=set_digests[i] if i < len(set_digests) else None,
            symbols_digest=symbols_digests[i] if i < len(symbols_digests) else None,
            rgb_digest=rgb_digest,
            duration_ms=duration_ms,
            ordinal=i,
            request_digest=request_digest,
        )
        for i, report in enumerate(reports)
    ]
