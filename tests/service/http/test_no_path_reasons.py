"""Issue 29, item 5: reasons kept. A backend that raises (a named error, or any exception) is
``dispatch_backend_failed`` in the report, whose wire form §5 fixes (no member added); its own
reason is in the no-path answer's message, beside each path's code in the reports, and in the
log with the path. On both stores (the decode stores its report)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _svc import SAMPLE_JSON, InProcess, in_process, pg_database

from wai_dispatch.dispatch import CPU_ONNX_RUNTIME, BackendFailed, ScriptedAdapter


class Raising(ScriptedAdapter):
    def __init__(self, exc: BaseException) -> None:
        super().__init__(CPU_ONNX_RUNTIME)
        self.exc = exc

    def run(self, job: Any) -> Any:
        raise self.exc


@pytest.fixture(params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[InProcess]:
    if request.param == "sqlite":
        with in_process(tmp_path / "data") as running:
            yield running
        return
    with (
        pg_database(request.getfixturevalue("postgres")) as url,
        in_process(tmp_path / "data", database_url=url) as running,
    ):
        yield running


@pytest.mark.parametrize(
    ("exc", "named"),
    [
        (BackendFailed("CUDA error: out of memory"), "BackendFailed: CUDA error: out of memory"),
        (KeyError("decoder.onnx"), "KeyError: 'decoder.onnx'"),
    ],
)
def test_a_failing_backend_names_its_error_in_the_no_path_answer(
    live: InProcess, caplog: pytest.LogCaptureFixture, exc: BaseException, named: str
) -> None:
    live.service.decoder.adapters[CPU_ONNX_RUNTIME] = Raising(exc)
    with caplog.at_level(logging.WARNING, "wai_dispatch.decode"), live.client("sink") as client:
        r = client.post(
            "/v1/decode",
            content=SAMPLE_JSON.read_bytes(),
            headers={"Content-Type": "application/json"},
        )
    assert r.status_code == 422
    body = r.json()
    assert body["error"]["code"] == "decode_no_path"
    message = body["error"]["message"]
    assert f"cpu/onnx-runtime/float: dispatch_backend_failed: {named}" in message
    (report,) = body["reports"]
    assert [
        (f"{p['unit']}/{p['backend']}/{p['arithmetic']}", p["reason"]) for p in report["refused"]
    ] == [
        ("npu/model-runtime/float", "dispatch_unit_absent"),
        ("cpu/onnx-runtime/float", "dispatch_backend_failed"),
        ("cpu/wai-ops/integer", "dispatch_arithmetic_mismatch"),
    ]
    # §5's wire form: a refused path is exactly its path and its reason
    assert all(set(p) == {"unit", "backend", "arithmetic", "reason"} for p in report["refused"])
    logged = [rec for rec in caplog.records if rec.name == "wai_dispatch.decode"]
    assert any(
        getattr(rec, "dispatch_path", None) == "cpu/onnx-runtime/float"
        and named in rec.getMessage()
        for rec in logged
    ), [rec.getMessage() for rec in logged]
