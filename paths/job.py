"""What a path adapter is asked to run: the latent of one decode and the parameter set it
reads. ``dispatch.choose`` passes it through untouched (the core never looks inside)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from wai_dispatch.paths.tiling import DEFAULT_TILE_BYTES
from wai_dispatch.setfacts.facts import SetFacts


class SetFiles(Protocol):
    """The verified bytes of an opened parameter set and its typed facts
    (``codec.sets.LoadedSet`` satisfies it; ``LoadedSet.from_files`` builds one in memory).

    ``read`` returns exactly the bytes that were checked against the manifest (and the pin);
    an adapter never re-reads a set file from disk.
    """

    @property
    def digest(self) -> str: ...

    @property
    def facts(self) -> SetFacts: ...

    def has(self, name: str) -> bool: ...

    def read(self, name: str) -> bytes: ...


@dataclass(frozen=True)
class SynthesisJob:
    """Run the synthesis of ``set_files`` on ``latent`` (float32, 1×C×h×w). ``symbols`` are
    the entropy stage's integers (int32, 1×C×h×w) the latent was made from: an integer path
    (``wai-ops``) reads them instead of the float latent.

    The decoder's own settings, never the process's: ``tile_bytes`` (an adapter built with a
    budget of its own keeps that one), ``cache_dir`` for the ONNX path's prepared graphs
    (:mod:`paths.onnx_cache`; ``None``: none on disk) and ``waiops_engine``
    (:mod:`paths.waiops.choose`)."""

    set_files: SetFiles
    latent: np.ndarray
    symbols: np.ndarray | None = None
    tile_bytes: int = DEFAULT_TILE_BYTES
    cache_dir: Path | None = None
    waiops_engine: str = "auto"

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.latent.shape)
