"""The picture is made while the decode's reports commit (service/usecase/decode.py's ``run``
through the recorder's group commit, service/store/recorder.py): the commit waits here until
the PNG has begun, so a decode that made its picture only after the commit would leave the
commit waiting the whole of :data:`WAIT_S` and find no PNG begun. The answer still comes only
once the reports are stored: the ids it carries are the store's."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import select

from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.decoding.results import DecodeResult
from wai_dispatch.service.store.models import ReportRow
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.spool import Spool
from wai_dispatch.service.usecase import decode as usecase
from wai_dispatch.service.usecase.decode import DecodeDone, DecodeRequest

#: How long the commit waits for the PNG to begin (only a decode that does not overlap waits
#: it all).
WAIT_S = 10.0


def test_the_png_is_made_while_the_reports_commit(
    decoder: Any, report_store: ReportStore, tmp_path: Path, monkeypatch: Any
) -> None:
    png_began = threading.Event()
    png = DecodeResult.png

    def png_beginning(self: DecodeResult, *args: Any, **kwargs: Any) -> bytes:
        png_began.set()
        return png(self, *args, **kwargs)

    monkeypatch.setattr(DecodeResult, "png", png_beginning)
    seen: list[bool] = []
    record = report_store.record

    def commit_seeing(records: Any) -> list[str]:
        seen.append(png_began.wait(WAIT_S))  # the PNG began while this commit was pending
        return record(records)

    monkeypatch.setattr(report_store, "record", commit_seeing)
    recorder = Recorder(report_store, Spool(tmp_path / "spool", 1 << 20), commit_window_s=0.002)
    try:
        body = (envelopes_dir() / "bmshj2018-demo-q3.json").read_bytes()
        request = DecodeRequest(body, "json", "sink-a", "rid-overlap")
        outcome = usecase.decode_here(decoder, request, recorder=recorder)
    finally:
        recorder.close()
    assert isinstance(outcome, DecodeDone)
    assert seen == [True], "the reports committed before the PNG began: nothing overlapped"
    assert outcome.picture.startswith(b"\x89PNG")
    with report_store.engine.connect() as conn:
        stored = conn.execute(
            select(ReportRow.id).where(ReportRow.request_id == "rid-overlap")
        ).scalars()
        assert sorted(stored) == sorted(outcome.report_ids)
