"""A decode's reports as store records: plain JSON-able dicts (the spool writes them as they
are), one per report, each with a fresh report id and the request id of its decode."""

from __future__ import annotations

import time
import uuid
from typing import Any

from wai_dispatch.dispatch import Report


def _path(obj: dict[str, Any]) -> str:
    return f"{obj['unit']}/{obj['backend']}/{obj['arithmetic']}"


def records_for(
    reports: list[Report],
    *,
    request_id: str,
    sink: str,
    set_digests: list[str | None],
    symbols_digests: list[str | None],
    rgb_digest: str | None,
    duration_ms: float,
) -> list[dict[str, Any]]:
    """One record per report, in the order tried (primary first). ``set_digests`` and
    ``symbols_digests`` are per report (``None`` where the part had none); the RGB digest goes
    on the report whose path ran."""
    now = int(time.time() * 1000)
    out = []
    for i, report in enumerate(reports):
        obj = report.to_json()
        ran = obj.get("ran")
        out.append(
            {
                "id": str(uuid.uuid4()),
                "request_id": request_id,
                "created_ms": now,
                "sink": sink,
                "role": "primary" if i == 0 else "fallback",
                "capability": report.capability,
                "set_digest": set_digests[i] if i < len(set_digests) else None,
                "symbols_digest": symbols_digests[i] if i < len(symbols_digests) else None,
                "rgb_digest": rgb_digest if ran else None,
                "needed": obj["needed"],
                "path_ran": _path(ran) if ran else None,
                "tier": ran["tier"] if ran else None,
                "outcome": "decoded" if ran else "refused",
                "duration_ms": round(duration_ms, 3),
                "placement": (ran or {}).get("placement") or {},
                "refusals": [{"path": _path(r), "code": r["reason"]} for r in obj["refused"]],
                "report": obj,
            }
        )
    return out


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A stored report as the API shows it."""
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
