"""A reader of CompressAI's own rANS strings (``RansEncoder.encode_with_indexes``), written from
its format: 64-bit rANS state, 32-bit words, 16-bit tables, and a 4-bit bypass code for the
escape bin. ``wai-dispatch import-compressai`` uses it, so an import needs no CompressAI."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.dispatch import strictjson

_RANS_L = 1 << 31  # lower bound of the normalised state interval
_MASK64 = (1 << 64) - 1
_BYPASS_BITS = 4
_MAX_BYPASS = (1 << _BYPASS_BITS) - 1
# CompressAI's escaped value is an int32 (``raw_val`` in rans_interface.cpp): 31 bits of
# magnitude, at most eight 4-bit groups; more is a string read against the wrong tables.
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_MAX_GROUPS = 8


class CompressAIStreamError(CodecError):
    """a CompressAI bitstream file or rANS string that does not read"""

    code = "compressai_stream_invalid"


class CompressAIHyperpriorError(CodecError):
    """a CompressAI hyperprior bitstream: its float h_s chose the tables, so it cannot be decoded
    at entropy-consistency; encode the picture with the set instead"""

    code = "compressai_hyperprior_unsupported"


#: Why a CompressAI hyperprior bitstream is refused, and what to do instead.
HYPERPRIOR_REFUSAL = (
    "a CompressAI hyperprior bitstream (ScaleHyperprior.compress(): y's and z's strings) is not "
    "imported: CompressAI's float hyper-synthesis h_s chose y's tables, and the set's integer "
    "h_s (the one every sink computes alike) chooses other tables at 4-12% of positions, so "
    "the bitstream cannot be decoded at entropy-consistency; encode the picture with the set "
    "instead: `wai-dispatch encode PICTURE --set DIGEST -o envelope.json` (docs/interop.md)"
)
#: CompressAI's zoo names of the models whose y is coded with tables a hyperprior chose.
HYPERPRIOR_MODELS = ("bmshj2018-hyperprior", "mbt2018", "cheng2020")


def is_hyperprior_model(model: object) -> bool:
    return isinstance(model, str) and model.startswith(HYPERPRIOR_MODELS)


def decode_string(data: bytes, tables: EntropyTables, shape: tuple[int, int, int]) -> np.ndarray:
    """Symbols (int32, C×H×W, CompressAI's order: channel, row, column) of one string.

    Each symbol is CompressAI's: the table value plus the channel's offset, with escaped
    values carried exactly by the bypass code.
    """
    channels, height, width = shape
    if channels != tables.channels:
        raise CompressAIStreamError(
            f"the string codes {channels} channels, the set's tables have {tables.channels}"
        )
    if len(data) % 4 or len(data) < 8:
        raise CompressAIStreamError(
            f"a rANS string is whole 32-bit words, at least two; got {len(data)} bytes"
        )
    rans = _Rans(data)
    precision = tables.precision
    mask = (1 << precision) - 1
    out = np.empty((channels, height * width), dtype=np.int32)
    for c in range(channels):
        cdf = tables.cdfs[c].tolist()
        max_value = int(tables.cdf_lengths[c]) - 2
        offset = int(tables.offsets[c])
        row = out[c]
        for i in range(height * width):
            value = rans.symbol(cdf, precision, mask)
            if value == max_value:  # the escape bin: the value follows in 4-bit groups
                raw = rans.escaped()
                value = -(raw >> 1) - 1 if raw & 1 else (raw >> 1) + max_value
            value += offset
            if not _INT32_MIN <= value <= _INT32_MAX:
                raise _wider_than_int32()
            row[i] = value
    if rans.state != _RANS_L or rans.pos != len(rans.words):
        raise CompressAIStreamError("the rANS string does not end where its symbols do")
    return out.reshape(channels, height, width)


class _Rans:
    """CompressAI's rANS decoder over one string: a 64-bit state, refilled with 32-bit words."""

    def __init__(self, data: bytes) -> None:
        self.words: list[int] = np.frombuffer(data, dtype="<u4").tolist()
        self.pos = 2
        self.state: int = self.words[0] | (self.words[1] << 32)

    def _refill(self, x: int) -> int:
        if x < _RANS_L:
            if self.pos >= len(self.words):
                raise CompressAIStreamError("the rANS string ends before its symbols do")
            x = ((x << 32) | self.words[self.pos]) & _MASK64
            self.pos += 1
        return x

    def symbol(self, cdf: list[int], precision: int, mask: int) -> int:
        """The next symbol's bin in ``cdf`` (of ``precision`` bits)."""
        state = self.state
        s = _search(cdf, state & mask)
        start, freq = cdf[s], cdf[s + 1] - cdf[s]
        self.state = self._refill(freq * (state >> precision) + (state & mask) - start)
        return s

    def _bits(self, n: int) -> int:
        value = self.state & ((1 << n) - 1)
        self.state = self._refill(self.state >> n)
        return value

    def escaped(self) -> int:
        """The raw value after an escape bin: its count of 4-bit groups, then the groups."""
        chunk = self._bits(_BYPASS_BITS)
        count = chunk
        while chunk == _MAX_BYPASS:
            chunk = self._bits(_BYPASS_BITS)
            count += chunk
            if count > _MAX_GROUPS:
                raise _wider_than_int32()
        if count > _MAX_GROUPS:
            raise _wider_than_int32()
        raw = 0
        for j in range(count):
            raw |= self._bits(_BYPASS_BITS) << (j * _BYPASS_BITS)
        if raw > _INT32_MAX:
            raise _wider_than_int32()
        return raw


def _wider_than_int32() -> CompressAIStreamError:
    return CompressAIStreamError(
        "an escaped value does not fit CompressAI's int32: the string was not coded with "
        "these tables"
    )


def _search(cdf: list[int], cum: int) -> int:
    """The bin whose interval holds ``cum``: the last index with ``cdf[s] <= cum``."""
    lo, hi = 0, len(cdf) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cdf[mid] <= cum:
            lo = mid
        else:
            hi = mid
    return lo


# --- the file `wai-dispatch import-compressai` reads ----------------------------------------

COMPRESSED_FORMAT = "compressai-compress/1"


def dump_compressed(
    strings: list[list[bytes]], shape: tuple[int, int], *, model: str, quality: int
) -> bytes:
    """What CompressAI's ``net.compress(x)`` returned (``out["strings"]``, ``out["shape"]``)
    as a JSON file (docs/interop.md): strings base64-encoded, one list per latent."""
    return json.dumps(
        {
            "format": COMPRESSED_FORMAT,
            "model": model,
            "quality": quality,
            "shape": [int(shape[0]), int(shape[1])],
            "strings": [[base64.b64encode(s).decode("ascii") for s in group] for group in strings],
        },
        indent=1,
    ).encode("utf-8")


def load_compressed(data: bytes) -> tuple[bytes, tuple[int, int], dict[str, Any]]:
    """The one rANS string of a batch-1 factorized-prior bitstream, its latent height and
    width, and the file's other members."""
    try:
        obj = strictjson.loads(data.decode("utf-8"))
        if not isinstance(obj, dict) or obj.get("format") != COMPRESSED_FORMAT:
            raise ValueError(f"not a {COMPRESSED_FORMAT} file")
        strings, shape = obj["strings"], obj["shape"]
        if is_hyperprior_model(obj.get("model")) or (
            isinstance(strings, list) and len(strings) == 2
        ):
            raise CompressAIHyperpriorError(HYPERPRIOR_REFUSAL)
        if (
            not isinstance(strings, list)
            or len(strings) != 1
            or not isinstance(strings[0], list)
            or len(strings[0]) != 1
        ):
            raise ValueError("expected one latent with one string (a factorized prior, batch 1)")
        if (
            not isinstance(shape, list)
            or len(shape) != 2
            or not all(isinstance(v, int) and 0 < v <= 4096 for v in shape)
        ):
            raise ValueError("shape is [height, width] of the latent")
        quality, model = obj.get("quality"), obj.get("model")
        if quality is not None and (not isinstance(quality, int) or isinstance(quality, bool)):
            raise ValueError(f"quality is an integer (CompressAI's quality), not {quality!r}")
        if model is not None and not isinstance(model, str):
            raise ValueError(f"model is a string (CompressAI's model name), not {model!r}")
        string = base64.b64decode(strings[0][0], validate=True)
    except CompressAIHyperpriorError:
        raise
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise CompressAIStreamError(f"compressed file: {exc}") from None
    meta = {k: v for k, v in obj.items() if k not in ("strings", "shape")}
    return string, (shape[0], shape[1]), meta
