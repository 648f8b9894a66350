"""A replica starts in seconds (docs/ray.md): a sync fetches the sets the registry lists and the
cache lacks at once (service/store/setsync.py), and warming opens and runs every installed set
at once (service/decoding/warm.py; prepare.py opens different sets side by side). Each test
makes every fetch (or every open) wait at a barrier for the others: one at a time, the first
waits alone and the barrier breaks."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from wai_dispatch.conformance import sets_dir
from wai_dispatch.dispatch import REFERENCE_OFFER
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.warm import Warmup
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.setregistry import SetRegistry
from wai_dispatch.service.store.setsync import FETCHERS, SetSync

#: How long a barrier waits for the others (a deadline for the meeting, not a measured time).
MEET_S = 60.0


def test_a_sync_fetches_the_missing_sets_at_once(tmp_path: Path, report_store: ReportStore) -> None:
    first = SetSync(
        SetRegistry(report_store),
        Decoder.assemble(tmp_path / "a", REFERENCE_OFFER, bundled=False),
        bundled=sets_dir(),
    )
    first.bootstrap()  # the bundled sets, into the registry
    listed = sorted(first.state.listed)
    assert len(listed) >= 2
    fresh = Decoder.assemble(tmp_path / "b", REFERENCE_OFFER, bundled=False)
    meet = threading.Barrier(min(FETCHERS, len(listed)), timeout=MEET_S)
    install = fresh.opened.install
    threads: set[str] = set()

    def install_when_all_fetch(source: Any) -> Any:
        threads.add(threading.current_thread().name)
        meet.wait()  # every fetch is under way before any installs
        return install(source)

    fresh.opened.install = install_when_all_fetch  # type: ignore[method-assign]
    state = SetSync(SetRegistry(report_store), fresh, bundled=None).sync()
    assert not state.problems, state.problems
    assert sorted(e.digest for e in fresh.set_store.list()) == listed
    assert len(threads) == min(FETCHERS, len(listed))


def test_warming_opens_and_runs_every_set_at_once(tmp_path: Path) -> None:
    decoder = Decoder.assemble(tmp_path / "data", REFERENCE_OFFER)
    sets = decoder.set_store.list()
    assert len(sets) >= 2
    meet = threading.Barrier(len(sets), timeout=MEET_S)
    opened = decoder.opened.store.open

    def open_when_all_open(digest: str) -> Any:
        meet.wait()  # inside each set's opening lock: a lock shared by all would break it
        return opened(digest)

    decoder.opened.store.open = open_when_all_open  # type: ignore[method-assign]
    results = Warmup(decoder).run()
    assert {w.digest for w in results} == {s.digest for s in sets}
    assert all(w.path and w.error is None for w in results), results
