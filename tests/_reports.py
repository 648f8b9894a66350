"""One stored report for the store's and the dashboard's tests: report ``i`` of ``sink`` at
``created_ms``, a float decode on the CPU (``ran``) or a primary report no path ran, with any
field of the report's JSON given in ``fields`` taking the place of the default."""

from __future__ import annotations

from typing import Any

from wai_dispatch.service.store.records import ReportRecord

A = "ab" * 32  # the set digest a report names unless told


def report(i: int, sink: str, created_ms: int, *, ran: bool = True, **fields: Any) -> ReportRecord:
    body: dict[str, Any] = {
        "id": f"00000000-0000-0000-0000-{i:012d}",
        "request_id": f"req-{i}",
        "created_ms": created_ms,
        "sink": sink,
        "role": "primary",
        "capability": "wai.neural.bmshj2018",
        "set_digest": A,
        "symbols_digest": None,
        "rgb_digest": None,
        "needed": "none",
        "path_ran": "cpu/onnx-runtime/float" if ran else None,
        "tier": "none" if ran else None,
        "outcome": "decoded" if ran else "refused",
        "duration_ms": 1.0,
        "placement": {"cpu": 3} if ran else {},
        "refusals": [],
        "report": {"i": i},
    }
    return ReportRecord.from_json(body | fields)
