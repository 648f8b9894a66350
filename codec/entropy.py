"""The entropy stage of a decode (§6.3) on the CPU, integer and table reads only: a set's
entropy tables, then a payload's symbols, their digest and the latent the networks read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wai_dispatch.codec import payload as payload_codec
from wai_dispatch.codec.sets.errors import SetNoTables
from wai_dispatch.codec.sets.loaded import LoadedSet
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.setfacts.limits import Limits


@dataclass(frozen=True)
class EntropyResult:
    """The symbols (int32, N×C×H×W), their BLAKE3 digest and the latent (float32)."""

    symbols: np.ndarray
    symbols_digest: str
    latent: np.ndarray

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.latent.shape)


def tables_of(set_files: LoadedSet) -> EntropyTables:
    """The entropy tables the set names (``facts.tables``), parsed from its verified bytes.
    Parsing 192 channels costs ~15 ms: a holder of the set keeps the result."""
    name = set_files.facts.tables
    if name is None or not set_files.has(name):
        raise SetNoTables(f"set {set_files.digest[:16]}… names no entropy tables file")
    return EntropyTables.from_json(set_files.read(name))


def entropy_stage(
    payload: bytes,
    tables: EntropyTables,
    *,
    limits: Limits,
    header: payload_codec.Header | None = None,
) -> EntropyResult:
    """§6.3: the payload's symbols (the header checked against ``limits`` before anything is
    allocated, unless ``header`` is that header, already read), their digest, and the latent."""
    symbols = payload_codec.decode(payload, tables, limits=limits, header=header)
    return EntropyResult(
        symbols, payload_codec.symbols_digest(symbols), payload_codec.latent(symbols, tables)
    )
