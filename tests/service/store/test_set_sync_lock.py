"""Two processes on one data directory (``serve --workers N``) change one set cache: every change
holds the cache's lock (a thread lock and a ``flock`` on ``.sync.lock``, service/store/setsync.py),
so one worker's sync never drops a set another worker has put into the cache and not yet
published to the registry. Two ``SetSync`` objects on one folder stand for the two processes:
their thread locks are their own, so only the ``flock`` keeps them apart."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from wai_dispatch.conformance import sets_dir
from wai_dispatch.dispatch import REFERENCE_OFFER
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.setregistry import SetRegistry
from wai_dispatch.service.store.setsync import SetSync


def _worker(data: Path, store: ReportStore) -> SetSync:
    return SetSync(SetRegistry(store), Decoder.assemble(data, REFERENCE_OFFER), bundled=None)


def test_a_sync_waits_for_an_install_that_has_not_published_yet(
    tmp_path: Path, report_store: ReportStore
) -> None:
    data = tmp_path / "data"
    installer, other = _worker(data, report_store), _worker(data, report_store)
    other.sync()  # the registry lists nothing yet: an empty cache
    publish = installer.registry.publish
    during: dict[str, Any] = {}

    def publish_while_the_other_syncs(*args: Any, **kwargs: Any) -> Any:
        # the set is in the shared cache now, not yet in the registry: the other worker's
        # sync, were it to run here, would take it for a set the registry dropped
        syncing = threading.Thread(target=other.sync)
        syncing.start()
        syncing.join(timeout=1.0)
        during["sync_waited"] = syncing.is_alive()
        during["thread"] = syncing
        return publish(*args, **kwargs)

    installer.registry.publish = publish_while_the_other_syncs  # type: ignore[method-assign]
    digest = installer.install(Path(sets_dir()) / "int-synth-int8-units-demo-q3")
    during["thread"].join(timeout=60)
    assert during["sync_waited"], "the other worker's sync ran while the install held the cache"
    assert not during["thread"].is_alive()
    # after the install published, the other worker's sync keeps the set: both see it
    assert digest in {e.digest for e in installer.cache.list()}
    assert other.state.listed == frozenset({digest})
    assert any(data.rglob(".sync.lock"))
