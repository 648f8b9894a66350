"""The seam between the HTTP service and the decoder: the service decodes through the one
:class:`service.decoding.decoder.Decoder` the CLI uses, obtained here and nowhere else, and adds
what only the service needs around it (the program cache's budget and counters, set listings)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path as FsPath
from typing import Any

from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.errors import Limits
from wai_dispatch.codec.sets import InstalledSet, SetError, SetStore
from wai_dispatch.dispatch import REFERENCE_OFFER, Adapter, Path
from wai_dispatch.service.decoding.cache import PathView, ProgramCache
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import DecodeResult, NoPath

__all__ = ["DecodeResult", "Engine", "NoPath", "open_engine"]


class Engine:
    """The decoder of this process and its program cache; :meth:`decode` is thread-safe."""

    def __init__(self, decoder: Decoder, cache_bytes: int = 512 * 1024 * 1024) -> None:
        self.decoder = decoder
        self.program_cache = ProgramCache(cache_bytes, self._program_bytes)
        for path, adapter in decoder.adapters.items():
            # The ONNX Runtime adapter keeps its sessions in ``_cache`` (digest → program);
            # it gets this engine's cache's view for its path, so one budget bounds them all.
            if isinstance(getattr(adapter, "_cache", None), OrderedDict | PathView):
                adapter._cache = self.program_cache.view(str(path))  # type: ignore[attr-defined]

    @property
    def store(self) -> SetStore:
        return self.decoder.store

    @property
    def limits(self) -> Limits:
        return self.decoder.limits

    @property
    def adapters(self) -> Mapping[Path, Adapter]:
        return self.decoder.adapters

    def decode(self, envelope: Envelope) -> DecodeResult:
        return self.decoder.decode(envelope)

    def paths(self) -> list[dict[str, Any]]:
        return [row.to_json() for row in self.decoder.paths()]

    def sets(self) -> list[InstalledSet]:
        return self.store.list()

    def set_for(self, capability: str, given: str | None) -> InstalledSet | None:
        """The installed set a part decodes with, or ``None`` when it is not installed."""
        try:
            return self.store.get(given) if given else self.store.default_for(capability)
        except SetError:
            return None

    def forget(self, digest: str) -> None:
        """Drop a removed set from the decoder's opened sets."""
        self.decoder.forget(digest)

    def _program_bytes(self, digest: str, path: str) -> int:
        """A program's bytes, held about twice (the set's bytes and the built session)."""
        try:
            manifest = self.store.get(digest).manifest
        except SetError:
            return 0
        backend = path.split("/")[1] if path.count("/") == 2 else ""
        spec = manifest.facts.program(backend)
        names = [] if spec is None else [spec.file, spec.weights]
        return 2 * sum(manifest.files[n].size for n in names if n in manifest.files)


def open_engine(
    data_dir: FsPath,
    offer: str | None = None,
    ort_threads: int | None = None,
    cache_bytes: int = 512 * 1024 * 1024,
) -> Engine:
    """The engine over ``data_dir`` (bundled sets installed), the offer (comma-separated
    paths, the offer setting; else the reference offer) and this build's adapters. ONNX Runtime's
    one process-wide thread pool is created here, before any session."""
    from wai_dispatch.paths.onnx import configure_thread_pool

    configure_thread_pool(ort_threads)
    paths = [p.strip() for p in offer.split(",") if p.strip()] if offer else None
    return Engine(Decoder.open(data_dir, paths or REFERENCE_OFFER), cache_bytes)
