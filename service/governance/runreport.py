"""The run report ``wai-run-report/1`` (docs/run-reports.md): :func:`parse_run_report` reads its
frame (id, sink, decodes) and refuses one that does not read (:class:`RunReportMalformed`); the
decodes are kept as written, since one that does not read is a refusal with its reason
(:mod:`.judge`), not an error."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from wai_dispatch.dispatch import strictjson
from wai_dispatch.service.governance.errors import RunReportMalformed

FORMAT = "wai-run-report/1"
MAX_RUN_REPORT_BYTES = 16 << 20
MAX_DECODES = 10_000
ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
SINK_PATTERN = re.compile(r"[^\s]{1,128}")
_MEMBERS = {"format", "id", "sink", "decodes"}


@dataclass(frozen=True, slots=True)
class RunReport:
    """A run report whose frame reads; ``decodes`` are the decode objects as submitted."""

    id: str
    sink: str
    decodes: tuple[object, ...]

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, "id": self.id, "sink": self.sink, "decodes": list(self.decodes)}


def parse_run_report(obj: object) -> RunReport:
    if not isinstance(obj, Mapping):
        raise RunReportMalformed("a run report is a JSON object")
    if set(obj) != _MEMBERS:
        missing = sorted(_MEMBERS - set(obj))
        extra = sorted(set(obj) - _MEMBERS)
        raise RunReportMalformed(
            f"a run report has exactly the members decodes, format, id, sink "
            f"(missing {missing}, unexpected {extra[:5]})"
        )
    if obj["format"] != FORMAT:
        raise RunReportMalformed(f"format is {str(obj['format'])[:64]!r}, not {FORMAT!r}")
    run_id, sink, decodes = obj["id"], obj["sink"], obj["decodes"]
    if not isinstance(run_id, str) or not ID_PATTERN.fullmatch(run_id):
        raise RunReportMalformed("id is 1 to 128 characters of A-Z a-z 0-9 . _ : -")
    if not isinstance(sink, str) or not SINK_PATTERN.fullmatch(sink):
        raise RunReportMalformed("sink is 1 to 128 characters, no white space")
    if not isinstance(decodes, list) or not decodes:
        raise RunReportMalformed("decodes is a non-empty list")
    if len(decodes) > MAX_DECODES:
        raise RunReportMalformed(f"decodes holds {len(decodes)}, over the {MAX_DECODES} allowed")
    return RunReport(run_id, sink, tuple(decodes))


def loads_run_report(data: str | bytes) -> RunReport:
    size = len(data.encode("utf-8") if isinstance(data, str) else data)
    if size > MAX_RUN_REPORT_BYTES:
        raise RunReportMalformed(f"{size} bytes, over the {MAX_RUN_REPORT_BYTES} allowed")
    try:
        obj = strictjson.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunReportMalformed(f"not JSON: {exc}") from None
    return parse_run_report(obj)
