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

    What the decoder that asks sets for its own decodes, never the process: ``tile_bytes``,
    the synthesis's tile budget (the ``tile_bytes`` setting; an adapter built with a budget of
    its own keeps that one), and ``cache_dir``, where the ONNX path keeps its prepared graphs
    (``<data_dir>/cache/onnx``, :mod:`paths.onnx_cache`; ``None``: not on disk), and
    ``waiops_engine``, the engine the ``wai-ops`` path runs its program with where it can
    (the ``waiops_engine`` setting, :mod:`paths.waiops.choose`; ``auto``: the rule)."""

    set_files: SetFiles
    latent: np.ndarray
    symbols: np.ndarray | None = None
    tile_bytes: int = DEFAULT_TILE_BYTES
    cache_dir: Path | None = None
    waiops_engine: str = "auto"

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.latent.shape)
