"""The entropy stage of a hyperprior set (``wai.neural.bmshj2018_hyperprior``;
docs/bmshj2018-hyperprior-set.md), on the CPU in integers only: the side latent's symbols from
the set's factorized tables, the hyper-synthesis as the set's ``wai-ops/1`` program (loaded and
bound-checked when the set is opened), the scale indexes from its integer output by the set's
threshold table, then y's symbols from the Gaussian tables those indexes choose. Every step is
integer arithmetic or a table read, so the symbols are the same on every machine, whatever path
then runs the synthesis (§3: entropy-consistency).

The set names the pieces in ``facts.hyperprior``::

    "hyperprior": {"z_tables": "cdfs_z_q3.json", "y_tables": "gaussian_q3.json",
                   "scale_index": "scale_index.json",
                   "program": "hyper_synthesis.wai-ops.json",
                   "weights": "hyper_synthesis.safetensors"}
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.payload import EntropyResult
from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.codec.sets.errors import SetNoTables
from wai_dispatch.codec.tables import EntropyTables, TablesError
from wai_dispatch.dispatch import strictjson
from wai_dispatch.paths.waiops import choose
from wai_dispatch.paths.waiops.load import load_program
from wai_dispatch.paths.waiops.program import Program
from wai_dispatch.setfacts.limits import Limits

FACT = "hyperprior"
_MEMBERS = ("z_tables", "y_tables", "scale_index", "program", "weights")


def hyper_facts(files: LoadedSet) -> dict[str, str] | None:
    """The set's ``facts.hyperprior`` (file names), when it has one."""
    extra: Any = (files.facts.model_extra or {}).get(FACT)
    if not isinstance(extra, dict):
        return None
    if not all(isinstance(extra.get(k), str) for k in _MEMBERS):
        raise SetNoTables(f"set {files.digest[:16]}…: facts.hyperprior names no {_MEMBERS}")
    return {k: extra[k] for k in _MEMBERS}


def scale_indexes(q: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Each integer scale's table index: how many thresholds lie strictly below it."""
    out: np.ndarray = np.searchsorted(thresholds, q.astype(np.int64), side="left")
    return out.astype(np.int32)


def read_thresholds(data: bytes, tables: int) -> np.ndarray:
    """The scale-index table (``{"format": "wai-scale-index/1", "scale_frac": f,
    "thresholds": [T_0 … T_{K-2}]}``): K−1 strictly increasing integers for K tables."""
    try:
        doc = strictjson.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TablesError(f"scale index: not JSON ({exc})") from exc
    t = doc.get("thresholds") if isinstance(doc, dict) else None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != "wai-scale-index/1"
        or not isinstance(t, list)
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in t)
        or len(t) != tables - 1
        or any(b <= a for a, b in itertools.pairwise(t))
    ):
        raise TablesError(f"scale index: not {tables - 1} increasing integer thresholds")
    return np.array(t, dtype=np.int64)


@dataclass(frozen=True)
class HyperStage:
    """A hyperprior set's entropy stage, built once per opened set."""

    z_tables: EntropyTables
    y_tables: EntropyTables
    thresholds: np.ndarray
    program: Program
    engines: choose.Engines  # by the decoder's waiops_engine, as its other wai-ops programs

    @classmethod
    def of(cls, files: LoadedSet) -> HyperStage | None:
        """The stage of ``files``, or ``None`` when the set is no hyperprior set. A program
        that breaks the bound rule raises its typed error here, as the set loads."""
        names = hyper_facts(files)
        if names is None:
            return None
        program = load_program(files.read(names["program"]), files.read(names["weights"]))
        y_tables = EntropyTables.from_json(files.read(names["y_tables"]))
        return cls(
            EntropyTables.from_json(files.read(names["z_tables"])),
            y_tables,
            read_thresholds(files.read(names["scale_index"]), y_tables.channels),
            program,
            choose.Engines(program, "hyperprior h_s"),
        )

    def indexes(self, z: np.ndarray, limits: Limits, engine: str = "auto") -> np.ndarray:
        """y's table indexes for the side latent's symbols ``z``: the integer program (on the
        ``engine`` asked for), then the threshold table."""
        q = self.engines.runner(engine).run(z, limits)
        return scale_indexes(np.asarray(q), self.thresholds)

    def run(self, payload: bytes, *, limits: Limits, engine: str = "auto") -> EntropyResult:
        """§6.3 for a ``WAIH`` payload: z, the indexes, y; the digest over z then y; the
        latent y as float32 (CompressAI's ``dequantize`` without means)."""
        header = waih.read_header(payload, limits=limits)
        z = waih.decode_z(payload, header, self.z_tables)
        index = self.indexes(z, limits, engine)
        if index.shape != header.y_shape:
            raise TablesError(f"the hyper-synthesis gives {index.shape}, y is {header.y_shape}")
        y = waih.decode_y(payload, header, index, self.y_tables)
        return EntropyResult(y, waih.symbols_digest(z, y), y.astype(np.float32))

    def zeros_payload(self, side: int, engine: str = "auto") -> bytes:
        """A payload whose z symbols (``side`` × ``side``) are all 0 (y's too): what warming
        decodes."""
        z = np.zeros((1, self.program.input_channels, side, side), dtype=np.int32)
        index = self.indexes(z, Limits(), engine)
        return waih.encode(z, np.zeros(index.shape, np.int32), index, self.z_tables, self.y_tables)
