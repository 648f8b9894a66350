"""The payload of the entropy stage (§6.3): header, rANS stream and escape section; payload to
symbols, their digest, and the latent the networks read (:func:`entropy_stage`, on the CPU,
integer and table reads only). Every byte is described in docs/payload.md.

Errors: :mod:`codec.errors` (their tree and codes are listed there), re-exported here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

import blake3
import numpy as np
import numpy.typing as npt

from wai_dispatch.codec import picture_size
from wai_dispatch.codec.errors import (
    CodecError,
    PayloadEscapeInvalid,
    PayloadFormatError,
    PayloadLengthError,
    PayloadLimitError,
    PayloadMagic,
    PayloadStreamError,
    PayloadTablesMismatch,
    PayloadTrailing,
    PayloadVersion,
    SymbolsError,
    check_latent_shape,
)
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.codec.varints import MAX_VARINT_BYTES, read_varints, write_varints
from wai_dispatch.setfacts.limits import Limits

_DEFAULT_LIMITS: Final = Limits()
MAGIC = b"WAIP"
VERSION = 1
#: The version whose header also carries the coded picture's width and height (docs/payload.md).
PICTURE_VERSION = 2
VERSIONS = (VERSION, PICTURE_VERSION)
# magic, version, flags, channels, height, width, stream_words, escape_count, escape_bytes
_HEADER = struct.Struct("<4sBBHHHIII")
HEADER_SIZE = _HEADER.size  # 24 (version 1)
#: Version 2's header ends with the picture's width and height (codec.picture_size), after 1's.
PICTURE_HEADER_SIZE = HEADER_SIZE + picture_size.FIELD.size  # 32
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
# Symbols decoded per call at most: a whole channel of a default-limits latent (256 x 256).
_CHUNK = 1 << 16
_STATE_FLOOR = 1 << 24


@dataclass(frozen=True, slots=True)
class Header:
    """The payload's fixed 24-byte header (docs/payload.md)."""

    version: int
    channels: int
    height: int
    width: int
    stream_words: int
    escape_count: int
    escape_bytes: int
    #: The coded picture's (width, height) (version 2); ``None``: the synthesis's whole output.
    picture: tuple[int, int] | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (1, self.channels, self.height, self.width)

    @property
    def header_size(self) -> int:
        return HEADER_SIZE if self.picture is None else PICTURE_HEADER_SIZE

    @property
    def symbols(self) -> int:
        return self.channels * self.height * self.width

    @property
    def total_bytes(self) -> int:
        return self.header_size + 4 * self.stream_words + self.escape_bytes


def read_header(payload: bytes, *, limits: Limits = _DEFAULT_LIMITS) -> Header:
    """Parse and check the header against ``limits`` and the payload's length; allocates nothing
    that depends on the header."""
    _check_framing(payload, limits)
    _, version, flags, channels, height, width, words, esc_count, esc_bytes = _HEADER.unpack_from(
        payload
    )
    picture = picture_size.read(payload, HEADER_SIZE) if version == PICTURE_VERSION else None
    header = Header(version, channels, height, width, words, esc_count, esc_bytes, picture)
    if flags != 0:
        raise PayloadFormatError(f"payload: reserved flags byte is {flags:#04x}, must be 0")
    _check_claims(header, len(payload), limits)
    return header


def _check_framing(payload: bytes, limits: Limits) -> None:
    """The payload's bytes, magic and version, and its whole header present."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise PayloadFormatError(f"payload must be bytes, not {type(payload).__name__}")
    size = len(payload)
    if size > limits.max_payload_bytes:
        raise PayloadLimitError(
            f"payload of {size} bytes exceeds the limit of {limits.max_payload_bytes}"
        )
    if size < 4 or bytes(payload[:4]) != MAGIC:
        # A short prefix of the magic is a truncated payload, anything else is not ours.
        if size < 4 and bytes(payload) == MAGIC[:size]:
            raise PayloadLengthError(f"payload of {size} bytes is shorter than its header")
        raise PayloadMagic("payload: bad magic (expected b'WAIP')")
    if size >= 5 and payload[4] not in VERSIONS:
        raise PayloadVersion(
            f"payload: version {payload[4]} is not supported (only {VERSION} and "
            f"{PICTURE_VERSION})",
        )
    head_size = PICTURE_HEADER_SIZE if size >= 5 and payload[4] == PICTURE_VERSION else HEADER_SIZE
    if size < head_size:
        raise PayloadLengthError(
            f"payload of {size} bytes is shorter than its {head_size}-byte header"
        )


def _check_claims(header: Header, size: int, limits: Limits) -> None:
    """What the header claims, held to ``limits`` and to the payload's ``size``: a latent shape
    within the limits, escapes that fit the symbols, and exactly the bytes present."""
    channels, height, width = header.channels, header.height, header.width
    esc_count, esc_bytes = header.escape_count, header.escape_bytes
    if channels == 0 or height == 0 or width == 0:
        raise PayloadFormatError(f"payload: empty latent shape {header.shape}")
    check_latent_shape(header.shape, limits, what="payload: latent")
    # Each escape is one to five bytes (docs/payload.md); a header claiming otherwise lies.
    if esc_count > header.symbols or not esc_count <= esc_bytes <= MAX_VARINT_BYTES * esc_count:
        raise PayloadFormatError(
            f"payload: {esc_count} escapes in {esc_bytes} bytes for {header.symbols} symbols"
        )
    if header.total_bytes > size:
        raise PayloadLengthError(
            f"payload: header declares {header.total_bytes} bytes, {size} present"
        )
    if header.total_bytes < size:
        raise PayloadTrailing(
            f"payload: {size - header.total_bytes} trailing bytes after the declared "
            f"{header.total_bytes}",
        )


# -- symbols -----------------------------------------------------------------------------------


def _check_symbols(symbols: Any) -> npt.NDArray[np.int32]:
    if not isinstance(symbols, np.ndarray):
        raise SymbolsError(f"symbols must be a numpy array, not {type(symbols).__name__}")
    if symbols.ndim != 4 or symbols.shape[0] != 1 or 0 in symbols.shape:
        raise SymbolsError(f"symbols must have shape (1, C, H, W), not {symbols.shape}")
    if not np.issubdtype(symbols.dtype, np.integer):
        raise SymbolsError(f"symbols must be integers, not {symbols.dtype}")
    if symbols.dtype != np.int32:
        if symbols.size and (int(symbols.min()) < _INT32_MIN or int(symbols.max()) > _INT32_MAX):
            raise SymbolsError("symbols must fit in int32")
        symbols = symbols.astype(np.int32)
    return np.ascontiguousarray(symbols)


def symbols_digest(symbols: np.ndarray[Any, Any]) -> str:
    """BLAKE3 (hex) of the symbols, each as int32 little-endian, in payload order C, H, W (§6.3)."""
    s = _check_symbols(symbols)
    return blake3.blake3(s.astype("<i4", copy=False).tobytes()).hexdigest()


def latent(symbols: np.ndarray[Any, Any], tables: EntropyTables) -> npt.NDArray[np.float32]:
    """Each symbol plus its channel's median, in float32 (§6.3; CompressAI's ``dequantize``)."""
    s = _check_symbols(symbols)
    if s.shape[1] != tables.channels:
        raise PayloadTablesMismatch(
            f"symbols have {s.shape[1]} channels, the tables {tables.channels}"
        )
    out = s.astype(np.float32)
    out += tables.medians[None, :, None, None]
    return out


# -- coding --------------------------------------------------------------------------------------

# The stream's bottom (decoded last) holds the latent's height and width, each uniform over 2^16
# (16 bits): it binds the header's shape to the stream, and an exhausted coder, which decodes 0
# forever, can never produce it (docs/payload.md, "End of stream").
_shape_model_cache: list[Any] = []


def _shape_model() -> Any:
    if not _shape_model_cache:
        import constriction

        _shape_model_cache.append(constriction.stream.model.Uniform(1 << 16))
    return _shape_model_cache[0]


def _layout(tables: EntropyTables) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per channel: the offset and the escape index ``L - 2`` (CompressAI's ``max_value``)."""
    return tables.offsets.astype(np.int64), tables.cdf_lengths.astype(np.int64) - 2


def encode(
    symbols: np.ndarray[Any, Any],
    tables: EntropyTables,
    *,
    picture: tuple[int, int] | None = None,
) -> bytes:
    """Code symbols of shape (1, C, H, W) against the tables; the payload bytes.  With
    ``picture`` (width, height), a version-2 payload that carries the coded picture's size
    (the decoder crops the synthesis to it); without, version 1."""
    import constriction

    s = _check_symbols(symbols)
    _, channels, height, width = s.shape
    if channels != tables.channels:
        raise PayloadTablesMismatch(
            f"symbols have {channels} channels, the tables {tables.channels}"
        )
    if channels > 0xFFFF or height > 0xFFFF or width > 0xFFFF:
        raise SymbolsError(f"symbols of shape {s.shape}: each dimension must be below 65536")
    offsets, escape = _layout(tables)
    index = s.reshape(channels, height * width).astype(np.int64) - offsets[:, None]
    low = index < 0
    high = index >= escape[:, None]
    # CompressAI's escape mapping (rans_interface.cpp): below -> odd, at or above -> even;
    # a bijection from the out-of-support values onto 0, 1, 2, ...
    raw = np.where(low, -2 * index - 1, 2 * (index - escape[:, None]))[low | high]
    index = np.where(low | high, escape[:, None], index).astype(np.int32)

    models = tables.models()
    coder = constriction.stream.stack.AnsCoder()
    coder.encode_reverse(np.array([height, width], dtype=np.int32), _shape_model())
    for c in range(channels - 1, -1, -1):
        coder.encode_reverse(index[c], models[c])
    words: bytes = coder.get_compressed().astype("<u4", copy=False).tobytes()
    escapes = write_varints(raw.astype(np.uint64))
    version = VERSION if picture is None else PICTURE_VERSION
    header = _HEADER.pack(
        MAGIC, version, 0, channels, height, width, len(words) // 4, int(raw.size), len(escapes)
    )
    size = b"" if picture is None else picture_size.to_bytes(picture)
    return header + size + words + escapes


def decode(
    payload: bytes,
    tables: EntropyTables,
    *,
    limits: Limits = _DEFAULT_LIMITS,
    header: Header | None = None,
) -> npt.NDArray[np.int32]:
    """Payload bytes to symbols of shape (1, C, H, W), int32. Raises only PayloadError.
    ``header``: the payload's header as :func:`read_header` read it with ``limits`` (read here
    when not given)."""
    if header is None:
        header = read_header(payload, limits=limits)
    if header.channels != tables.channels:
        raise PayloadTablesMismatch(
            f"payload has {header.channels} channels, the tables {tables.channels}"
        )
    try:
        return _decode(payload, header, tables)
    except CodecError:
        raise
    except Exception as exc:  # constriction and numpy failures become a typed error
        raise PayloadStreamError(f"payload: the stream does not decode: {exc}") from exc


@dataclass(frozen=True)
class EntropyResult:
    """The symbols (int32, N×C×H×W), their BLAKE3 digest and the latent (float32)."""

    symbols: np.ndarray
    symbols_digest: str
    latent: np.ndarray

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.latent.shape)


def entropy_stage(
    payload: bytes,
    tables: EntropyTables,
    *,
    limits: Limits,
    header: Header | None = None,
) -> EntropyResult:
    """§6.3: the payload's symbols (the header checked against ``limits`` before anything is
    allocated, unless ``header`` is that header, already read), their digest, and the latent."""
    symbols = decode(payload, tables, limits=limits, header=header)
    return EntropyResult(symbols, symbols_digest(symbols), latent(symbols, tables))


def _decode(payload: bytes, header: Header, tables: EntropyTables) -> npt.NDArray[np.int32]:
    index = _indexes(payload, header, tables)
    escape = tables.cdf_lengths - 2  # int32, like index: no widening of the C x H x W compare
    is_escape = index == escape[:, None]
    # Stays int32: every index's value, up to offset + L - 2, fits (checked with the tables).
    symbols: npt.NDArray[np.int32] = index + tables.offsets[:, None]
    if header.escape_count == 0:
        if is_escape.any():
            raise PayloadEscapeInvalid(
                "payload: the stream holds escapes, the header none",
            )
        return symbols.reshape(header.shape)
    where = np.flatnonzero(is_escape)
    if where.size != header.escape_count:
        raise PayloadEscapeInvalid(
            f"payload: the stream holds {where.size} escapes, the header {header.escape_count}",
        )
    start = header.header_size + 4 * header.stream_words
    raw = read_varints(payload[start : start + header.escape_bytes], where.size)
    channel = where // (header.height * header.width)
    value = (
        np.where(
            raw & 1 == 1,
            -((raw + 1) >> 1).astype(np.int64),
            (raw >> 1).astype(np.int64) + escape[channel],
        )
        + tables.offsets[channel]
    )
    if int(value.min()) < _INT32_MIN or int(value.max()) > _INT32_MAX:
        raise PayloadEscapeInvalid("payload: an escaped symbol is outside int32")
    symbols.reshape(-1)[where] = value.astype(np.int32)
    return symbols.reshape(header.shape)


def _indexes(payload: bytes, header: Header, tables: EntropyTables) -> npt.NDArray[np.int32]:
    """The rANS stream's table indexes (C × H·W), the escape bin's included; the stream must
    hold exactly the header's symbols."""
    import constriction

    count = header.height * header.width
    words = np.frombuffer(
        payload, dtype="<u4", count=header.stream_words, offset=header.header_size
    )
    if header.stream_words and words[-1] == 0:
        # constriction refuses a stream ending in a zero word; the encoder never writes one.
        raise PayloadStreamError("payload: the rANS stream ends in a zero word")
    models = tables.models()
    coder = constriction.stream.stack.AnsCoder(words.astype(np.uint32))
    # Memory and time follow what the stream really holds, not what the header claims. Until the
    # shape at its bottom is decoded, a valid stream's state is at least 2^24 (the shape alone
    # puts it there and every symbol coded on top keeps it there), so an exhausted stream whose
    # state fell below (a small state decodes index 0 forever) stops at the next chunk.
    parts = []
    decode_, pos = coder.decode, coder.pos  # bound once: this loop runs C times per payload
    for c, model in enumerate(models):
        for start in range(0, count, _CHUNK):
            words_left, state = pos()
            if words_left == 0 and state < _STATE_FLOOR:
                raise PayloadStreamError(
                    f"payload: the rANS stream ends within channel {c} of {header.channels}"
                )
            parts.append(decode_(model, min(_CHUNK, count - start)))
    index: npt.NDArray[np.int32] = np.concatenate(parts).reshape(header.channels, count)
    # Decoding from an exhausted coder yields index 0 forever and stays "empty", so an empty
    # coder alone cannot tell a stream that ended early; the shape at the bottom (never 0) can,
    # and it also refuses a header that reshapes the same count of symbols.
    shape = coder.decode(_shape_model(), 2)
    if shape[0] != header.height or shape[1] != header.width or not coder.is_empty():
        raise PayloadStreamError(
            f"payload: the rANS stream does not hold exactly {header.symbols} symbols"
        )
    return index
