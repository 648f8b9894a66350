"""tools/trace_route.py counts every thread that worked for the traced request: the ones handed
work while it ran (a signalled wait, a pool's work item), not those that woke on their own
timer meanwhile."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from wai_dispatch.tools.trace_route import Trace, package_of, trace_one_decode


def _ours() -> str:
    return package_of("wai_dispatch.codec.payload")


def test_a_thread_handed_work_counts_and_one_on_its_timer_does_not() -> None:
    trace, work = Trace(), threading.Condition()

    def committer() -> None:  # as the report committer: it waits to be handed a batch
        with work:
            assert work.wait(timeout=30)
        _ours()

    def ticker() -> None:  # as the metrics sampler: it wakes on its own timer
        threading.Event().wait(0.5)
        _ours()

    threading.setprofile(trace)
    try:
        threads = [threading.Thread(target=f, name=f.__name__) for f in (committer, ticker)]
        for t in threads:
            t.start()
        trace.on = True
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
            pool.submit(_ours).result()
        threads[1].join()
        with work:
            work.notify()
        threads[0].join()
        trace.on = False
    finally:
        threading.setprofile(None)
    figures = trace.figures()
    assert figures["thread_names"] == ["committer", "pool_0"]
    assert figures["background_threads"] == ["ticker"]
    assert figures["module_names"] == ["wai_dispatch.tools.trace_route"]


@pytest.mark.slow
def test_one_decode_counts_the_prepare_worker_and_the_committer(tmp_path: Path) -> None:
    figures = trace_one_decode(tmp_path / "data")
    assert sys.getprofile() is None
    assert "report-commit-0" in figures["thread_names"]
    assert "decode_0" in figures["thread_names"]
    modules = set(figures["module_names"])
    assert {
        "wai_dispatch.service.store.recorder",  # the committer's
        "wai_dispatch.service.decoding.prepare",  # the prepare worker's
        "wai_dispatch.service.http.routes.decode",
    } <= modules
    assert figures["modules"] == len(modules)
    assert figures["modules"] <= 32, sorted(modules)  # issue 35: one decode, few rooms
    assert all(not name.startswith(("metrics", "wai-set-sync")) for name in figures["thread_names"])
