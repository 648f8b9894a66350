"""The entropy stage's tables (a set's ``cdfs_q<quality>.json``): per channel a 16-bit quantized
CDF in CompressAI's ``EntropyBottleneck`` layout, its offset and its median (§6.3;
docs/payload.md), read from the set that names them (:func:`tables_of`). Loading validates
every value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.sets.errors import SetNoTables
from wai_dispatch.codec.sets.loaded import LoadedSet
from wai_dispatch.dispatch import strictjson
from wai_dispatch.setfacts.limits import Limits

_DEFAULT_LIMITS: Final = Limits()
FORMAT = "wai-entropy-tables/1"
# constriction's default ANS coder works at 24-bit precision; a 16-bit table is exact there as
# ``frequency << 8`` (checked per channel in ``_build_model``).
CODER_PRECISION = 24
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


class TablesError(CodecError):
    """an entropy table that fails validation (names the channel)"""

    code = "tables_invalid"


class TablesUnsupported(TablesError):
    """an entropy table format this build cannot read"""

    code = "tables_unsupported"


def _as_numpy(value: Any) -> np.ndarray[Any, Any]:
    # Torch tensors (CompressAI's buffers) without importing torch here.
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list):
        raise TablesError(f"tables: {what} must be a list of integers")
    for v in value:
        # bool is an int in Python, and JSON floats like 1.0 are not table values.
        if not isinstance(v, int) or isinstance(v, bool):
            raise TablesError(f"tables: {what} holds a non-integer value {v!r}")
    return value


@dataclass(frozen=True, eq=False)
class EntropyTables:
    """Validated entropy tables. Arrays are read-only; construction validates (raises TablesError).

    Two instances are equal when their canonical JSON is equal.
    """

    # Any integer/float arrays (or torch tensors) on input; int32 / float32, read-only, after.
    cdfs: tuple[np.ndarray[Any, Any], ...]
    cdf_lengths: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]
    medians: np.ndarray[Any, Any]
    precision: int = 16
    # Built on first use by codec.payload: one constriction model per channel (see ``models``).
    _models: tuple[Any, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.precision != 16:
            # §6.3 tables are CompressAI's 16-bit ones; the 24-bit coder reproduces those exactly.
            raise TablesError(f"tables: precision {self.precision!r} is not supported (only 16)")
        try:
            cdfs = tuple(np.array(_as_numpy(c), dtype=np.int64) for c in self.cdfs)
            lengths = np.array(_as_numpy(self.cdf_lengths), dtype=np.int64).reshape(-1)
            offsets = np.array(_as_numpy(self.offsets), dtype=np.int64).reshape(-1)
            medians = np.array(_as_numpy(self.medians), dtype=np.float64).reshape(-1)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TablesError(f"tables: arrays are not numeric: {exc}") from exc
        channels = len(cdfs)
        if channels == 0:
            raise TablesError("tables: no channels")
        for name, arr in (("cdf_lengths", lengths), ("offsets", offsets), ("medians", medians)):
            if arr.shape != (channels,):
                raise TablesError(f"tables: {name} has {arr.size} entries for {channels} channels")
        top = 1 << self.precision
        for c in range(channels):
            _check_channel(c, cdfs[c], int(lengths[c]), int(offsets[c]), float(medians[c]), top)

        def frozen(a: np.ndarray[Any, Any], dtype: Any) -> np.ndarray[Any, Any]:
            out = np.ascontiguousarray(a, dtype=dtype)
            out.flags.writeable = False
            return out

        with np.errstate(over="ignore"):
            medians32 = medians.astype(np.float32)
        object.__setattr__(self, "cdfs", tuple(frozen(c, np.int32) for c in cdfs))
        object.__setattr__(self, "cdf_lengths", frozen(lengths, np.int32))
        object.__setattr__(self, "offsets", frozen(offsets, np.int32))
        object.__setattr__(self, "medians", frozen(medians32, np.float32))

    @property
    def channels(self) -> int:
        return len(self.cdfs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EntropyTables):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.to_json())

    # -- JSON -------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: bytes | str, *, limits: Limits = _DEFAULT_LIMITS) -> EntropyTables:
        """Parse and validate tables JSON (docs/payload.md, "Tables")."""
        try:
            doc = strictjson.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise TablesError(f"tables: not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise TablesError("tables: the document is not a JSON object")
        expected = {"format", "precision", "channels", "cdfs", "cdf_lengths", "offsets", "medians"}
        missing = sorted(expected - doc.keys())
        extra = sorted(doc.keys() - expected)
        if missing or extra:
            raise TablesError(f"tables: missing members {missing}, unknown members {extra}")
        if doc["format"] != FORMAT:
            raise TablesError(f"tables: format {doc['format']!r} is not {FORMAT!r}")
        channels = doc["channels"]
        if not isinstance(channels, int) or isinstance(channels, bool) or channels < 1:
            raise TablesError(f"tables: channels {channels!r} is not a positive integer")
        if channels > limits.max_channels:
            raise TablesError(f"tables: {channels} channels exceed the limit {limits.max_channels}")
        precision = doc["precision"]
        if not isinstance(precision, int) or isinstance(precision, bool):
            raise TablesError(f"tables: precision {precision!r} is not an integer")
        cdfs = doc["cdfs"]
        if not isinstance(cdfs, list) or len(cdfs) != channels:
            size = len(cdfs) if isinstance(cdfs, list) else "no"
            raise TablesError(f"tables: cdfs holds {size} lists for {channels} channels")
        lengths = _int_list(doc["cdf_lengths"], "cdf_lengths")
        offsets = _int_list(doc["offsets"], "offsets")
        medians = doc["medians"]
        if not isinstance(medians, list) or not all(
            isinstance(m, int | float) and not isinstance(m, bool) for m in medians
        ):
            raise TablesError("tables: medians must be a list of numbers")
        for name, values in (("cdf_lengths", lengths), ("offsets", offsets), ("medians", medians)):
            if len(values) != channels:
                raise TablesError(
                    f"tables: {name} has {len(values)} entries for {channels} channels"
                )
        for i, v in enumerate(lengths + offsets):
            if not _INT32_MIN <= v <= _INT32_MAX:
                raise TablesError(f"tables: channel {i % channels}: {v} is out of int32 range")
        arrays = []
        for c, cdf in enumerate(cdfs):
            values = _int_list(cdf, f"cdfs[{c}]")
            if any(not 0 <= v <= 1 << 16 for v in values):
                raise TablesError(f"tables: channel {c}: CDF value out of [0, 65536]")
            arrays.append(np.array(values, dtype=np.int64))
        return cls(
            cdfs=tuple(arrays),
            cdf_lengths=np.array(lengths, dtype=np.int64),
            offsets=np.array(offsets, dtype=np.int64),
            medians=np.array(medians, dtype=np.float64),
            precision=precision,
        )

    def to_json(self) -> bytes:
        """Canonical bytes: sorted keys, no spaces, medians as the shortest float that reads back
        to the same float32, one trailing newline."""
        doc = {
            "format": FORMAT,
            "precision": self.precision,
            "channels": self.channels,
            "cdfs": [c.tolist() for c in self.cdfs],
            "cdf_lengths": self.cdf_lengths.tolist(),
            "offsets": self.offsets.tolist(),
            "medians": [_float32_repr(m) for m in self.medians],
        }
        return (
            json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii")
            + b"\n"
        )

    # -- CompressAI -------------------------------------------------------------------------

    @classmethod
    def from_compressai(
        cls, quantized_cdf: Any, cdf_length: Any, offset: Any, medians: Any
    ) -> EntropyTables:
        """From an updated ``EntropyBottleneck``'s ``_quantized_cdf`` (padded, 2-D),
        ``_cdf_length``, ``_offset`` and medians (``quantiles[:, :, 1]``); torch or numpy."""
        try:
            table = _as_numpy(quantized_cdf).astype(np.int64)
            lengths = _as_numpy(cdf_length).astype(np.int64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise TablesError(f"tables: CompressAI arrays are not numeric: {exc}") from exc
        if table.ndim != 2 or table.shape[0] != lengths.shape[0]:
            raise TablesError(
                f"tables: quantized_cdf of shape {table.shape} for {lengths.shape[0]} lengths"
            )
        for c, n in enumerate(lengths.tolist()):
            if not 0 < n <= table.shape[1]:
                raise TablesError(f"tables: channel {c}: cdf_length {n} outside the padded table")
        return cls(
            cdfs=tuple(table[c, : int(n)] for c, n in enumerate(lengths.tolist())),
            cdf_lengths=lengths,
            offsets=_as_numpy(offset).reshape(-1),
            medians=_as_numpy(medians).reshape(-1),
        )

    # -- the coder's models -----------------------------------------------------------------

    def frequencies(self, channel: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The table's frequencies over the channel's real support (``L - 1`` symbols)."""
        return np.diff(self.cdfs[channel].astype(np.int64))

    def models(self) -> tuple[Any, ...]:
        """One ``constriction`` Categorical per channel, each checked to reproduce the 16-bit
        table exactly at the coder's 24-bit precision. Built once, then cached."""
        if not self._models:
            built = tuple(_build_model(self.frequencies(c), c) for c in range(self.channels))
            # One atomic assignment: threads racing here each build the same models, and no
            # reader ever sees a partial list.
            object.__setattr__(self, "_models", built)
        return self._models


def tables_of(set_files: LoadedSet) -> EntropyTables:
    """The entropy tables the set names (``facts.tables``), parsed from its verified bytes.
    Parsing 192 channels costs ~15 ms: a holder of the set keeps the result."""
    name = set_files.facts.tables
    if name is None or not set_files.has(name):
        raise SetNoTables(f"set {set_files.digest[:16]}… names no entropy tables file")
    return EntropyTables.from_json(set_files.read(name))


def laplacian_tables(channels: int, *, seed: int = 0, escape_mass: float = 1e-3) -> EntropyTables:
    """CompressAI-shaped tables of discretized Laplacians (scales 0.3–6, medians near 0, an escape
    bin of ``escape_mass``), for tests and benchmarks that must not need torch."""
    rng = np.random.default_rng(seed)
    cdfs, offsets, medians = [], [], []
    for _ in range(channels):
        scale = float(rng.uniform(0.3, 6.0))
        low = -int(np.ceil(scale * 8)) - int(rng.integers(0, 3))
        high = int(np.ceil(scale * 8)) + int(rng.integers(0, 3))
        x = np.arange(low, high + 1)
        pmf = np.exp(-np.abs(x) / scale)
        pmf = np.append(pmf / pmf.sum() * (1.0 - escape_mass), escape_mass)
        # Like CompressAI's pmf_to_quantized_cdf: every bin at least 1, the rest to the mode.
        freq = np.maximum(1, np.round(pmf * 65536)).astype(np.int64)
        freq[int(np.argmax(freq))] += 65536 - int(freq.sum())
        cdfs.append(np.concatenate(([0], np.cumsum(freq))))
        offsets.append(low)
        medians.append(float(rng.normal(0.0, 0.5)))
    return EntropyTables(
        cdfs=tuple(cdfs),
        cdf_lengths=np.array([len(c) for c in cdfs]),
        offsets=np.array(offsets),
        medians=np.array(medians, dtype=np.float32),
    )


def _check_channel(
    c: int, cdf: np.ndarray[Any, Any], length: int, offset: int, median: float, top: int
) -> None:
    if cdf.ndim != 1:
        raise TablesError(f"tables: channel {c}: CDF is not one-dimensional")
    if length < 3 or length > top + 1:
        # One regular value and the escape bin at least; every bin needs frequency >= 1.
        raise TablesError(f"tables: channel {c}: cdf_length {length} outside [3, {top + 1}]")
    if cdf.shape[0] != length:
        raise TablesError(f"tables: channel {c}: CDF has {cdf.shape[0]} entries, length {length}")
    if cdf[0] != 0 or cdf[-1] != top:
        raise TablesError(f"tables: channel {c}: CDF must run from 0 to {top}")
    if not bool(np.all(np.diff(cdf) > 0)):
        bad = int(np.argmin(np.diff(cdf) > 0))
        raise TablesError(f"tables: channel {c}: CDF not strictly increasing at index {bad}")
    # Symbols are int32 (§6.3): every table index's value, up to offset + L - 2, must be one.
    if not offset >= _INT32_MIN or offset + length - 2 > _INT32_MAX:
        raise TablesError(f"tables: channel {c}: offset {offset} puts values outside int32")
    with np.errstate(over="ignore"):
        as_float32 = float(np.float32(median))
    if not math.isfinite(median) or not math.isfinite(as_float32):
        raise TablesError(f"tables: channel {c}: median {median!r} is not a finite float32")


def _float32_repr(value: np.float32) -> float | int:
    # repr of the float64 equal to the float32 reads back to the same float32; shortest form.
    text = np.format_float_positional(np.float32(value), unique=True, trim="-")
    out = float(text)
    return out


def _build_model(freqs: np.ndarray[Any, np.dtype[np.int64]], channel: int) -> Any:
    import constriction

    model = constriction.stream.model.Categorical(freqs.astype(np.float64), perfect=True)
    _verify_model(model, freqs, channel)
    return model


def _verify_model(model: Any, freqs: npt.NDArray[np.int64], channel: int) -> None:
    """Check constriction quantized ``freqs`` to exactly ``freqs << 8`` at 24 bits.

    ANS decoding from state ``x`` picks the symbol ``s`` whose interval holds ``x mod 2^24`` and
    leaves ``p_s * (x >> 24) + (x mod 2^24) - cdf_s``. Seeking a coder to
    ``x = 2^48 + (cdf_s << 8)`` must therefore decode ``s`` and leave exactly
    ``(f_s << 8) << 24``: that pins both the left edge and the width of every bin.
    """
    import constriction

    shift = CODER_PRECISION - 16
    coder = constriction.stream.stack.AnsCoder()
    left = 0
    for s, f in enumerate(freqs.tolist()):
        coder.seek(0, (1 << 48) | (left << shift))
        got = int(coder.decode(model))
        state = int(coder.pos()[1])
        if got != s or state != (f << shift) << CODER_PRECISION:
            raise TablesUnsupported(
                f"tables: channel {channel}: the coder does not reproduce the 16-bit table "
                f"at index {s}",
            )
        left += f
