"""The seam between the HTTP service and the decoder: the one object the service decodes
through, obtained here and nowhere else, so that the CLI and HTTP decode alike.

Today it wraps :func:`service.pipeline.decode_envelope` with the store, offer and adapters the
CLI uses; when the package's ``Decoder`` lands, :func:`open_engine` returns it instead.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path as FsPath
from typing import Any

from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.errors import Limits
from wai_dispatch.codec.sets import InstalledSet, SetStore, ensure_bundled
from wai_dispatch.dispatch import Adapter, Offer, Path, parse_offer
from wai_dispatch.service.cache import PathView, ProgramCache
from wai_dispatch.service.pipeline import DecodeResult, NoPath, decode_envelope

__all__ = ["DecodeResult", "Engine", "NoPath", "open_engine"]


class Engine:
    """Sets, offer and adapters of this process; :meth:`decode` is thread-safe."""

    def __init__(
        self,
        store: SetStore,
        offer: Offer,
        adapters: Mapping[Path, Adapter],
        cache_bytes: int = 512 * 1024 * 1024,
    ) -> None:
        self.store = store
        self.offer = offer
        self.adapters = adapters
        self.limits = Limits()
        self.program_cache = ProgramCache(cache_bytes, self._program_bytes)
        for path, adapter in adapters.items():
            # The ONNX Runtime adapter keeps its sessions in ``_cache`` (digest → program);
            # it gets this engine's cache's view for its path, so one budget bounds them all.
            if isinstance(getattr(adapter, "_cache", None), OrderedDict | PathView):
                adapter._cache = self.program_cache.view(str(path))  # type: ignore[attr-defined]

    def _program_bytes(self, digest: str, path: str) -> int:
        """A program's bytes, held about twice (the set's bytes and the built session)."""
        try:
            manifest = self.store.get(digest).manifest
        except Exception:
            return 0
        backend = path.split("/")[1] if path.count("/") == 2 else ""
        spec = (manifest.facts.get("programs") or {}).get(backend) or {}
        names = [spec.get("file"), spec.get("weights")]
        return 2 * sum(manifest.files[n].size for n in names if n in manifest.files)

    def decode(self, envelope: Envelope) -> DecodeResult:
        return decode_envelope(
            envelope,
            store=self.store,
            offer=self.offer,
            adapters=self.adapters,
            limits=self.limits,
        )

    def paths(self) -> list[dict[str, Any]]:
        from wai_dispatch.paths.registry import probe

        return [row.to_json() for row in probe(self.offer)]

    def sets(self) -> list[InstalledSet]:
        return self.store.list()

    def facts(self, digest: str) -> Mapping[str, Any]:
        return self.store.get(digest).manifest.facts

    def set_for(self, capability: str, given: str | None) -> InstalledSet | None:
        """The installed set a part decodes with, or ``None`` when it is not installed."""
        from wai_dispatch.codec.sets import SetError

        try:
            return self.store.get(given) if given else self.store.default_for(capability)
        except SetError:
            return None


def open_engine(
    data_dir: FsPath,
    offer: str | None = None,
    ort_threads: int | None = None,
    cache_bytes: int = 512 * 1024 * 1024,
) -> Engine:
    """The engine over ``<data_dir>/sets`` (bundled sets installed), the offer (comma-separated
    paths, else WAI_OFFER, else the reference offer) and this build's adapters. ONNX Runtime's
    one process-wide thread pool is created here, before any session."""
    from wai_dispatch.codec.config import sets_dir
    from wai_dispatch.paths.onnx import configure_thread_pool
    from wai_dispatch.paths.registry import default_offer, known_adapters

    configure_thread_pool(ort_threads)
    store = SetStore(sets_dir(data_dir))
    ensure_bundled(store)
    chosen = parse_offer(p.strip() for p in offer.split(",") if p.strip()) if offer else None
    return Engine(store, chosen or default_offer(), known_adapters(), cache_bytes)
