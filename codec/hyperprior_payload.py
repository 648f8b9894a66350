"""The payload of a hyperprior capability (``WAIH``, docs/payload.md "Hyperprior payload"): ``z``
as a whole ``WAIP`` payload, then ``y``'s rANS stream against the Gaussian tables ``z``'s scale
indexes choose. Decoding ``y`` needs the indexes, which only the set's integer hyper-synthesis
gives: :func:`decode_y` takes them (service/decoding/hyperprior.py computes them).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import blake3
import numpy as np
import numpy.typing as npt

from wai_dispatch.codec import payload as waip
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
from wai_dispatch.codec.varints import read_varints, write_varints
from wai_dispatch.setfacts.limits import Limits

_DEFAULT_LIMITS: Final = Limits()
MAGIC = b"WAIH"
VERSION = 1
#: The version whose header also carries the coded picture's width and height (docs/payload.md).
PICTURE_VERSION = 2
#: magic, version, flags, y channels, z bytes, y stream words, y escape count, y escape bytes
_HEADER = struct.Struct("<4sBBHIIII")
HEADER_SIZE = _HEADER.size  # 24 (version 1; version 2 adds the picture, 8 bytes)
#: ``y`` has 4× the side latent's height and width (h_s: two stride-2 transposed convolutions).
UPSAMPLING = 4
#: The likely cause of a y stream that does not decode (docs/interop.md, "The hyperprior").
FLOAT_HS_CAUSE = (
    "likely cause: it was coded with tables chosen by a float hyper-synthesis (CompressAI's "
    "h_s chooses other tables than the set's integer one at 4-12% of positions), so it cannot "
    "be decoded at entropy-consistency; code the picture with `wai-dispatch encode` and this "
    "set instead (docs/interop.md)"
)
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class HyperHeader:
    """The ``WAIH`` header, and the side latent's ``WAIP`` header inside it."""

    y_channels: int
    z_bytes: int
    y_words: int
    y_escape_count: int
    y_escape_bytes: int
    z: waip.Header
    #: The coded picture's (width, height) (version 2); ``None``: the synthesis's whole output.
    picture: tuple[int, int] | None = None

    @property
    def header_size(self) -> int:
        return HEADER_SIZE if self.picture is None else HEADER_SIZE + picture_size.FIELD.size

    @property
    def y_shape(self) -> tuple[int, int, int, int]:
        return (1, self.y_channels, UPSAMPLING * self.z.height, UPSAMPLING * self.z.width)

    def as_latent_header(self) -> waip.Header:
        """A ``WAIP``-shaped header of ``y`` (what a decode's cost estimate reads)."""
        _, c, h, w = self.y_shape
        return waip.Header(
            VERSION, c, h, w, self.y_words, self.y_escape_count, self.y_escape_bytes, self.picture
        )


def read_header(payload: bytes, *, limits: Limits = _DEFAULT_LIMITS) -> HyperHeader:
    """Parse and check both headers against ``limits`` and the payload's length."""
    size = len(payload)
    if size > limits.max_payload_bytes:
        raise PayloadLimitError(f"payload of {size} bytes exceeds {limits.max_payload_bytes}")
    if size < 4 or bytes(payload[:4]) != MAGIC:
        raise PayloadMagic("payload: bad magic (expected b'WAIH')")
    if size >= 5 and payload[4] not in (VERSION, PICTURE_VERSION):
        raise PayloadVersion(
            f"payload: WAIH version {payload[4]} is not supported (only {VERSION} and "
            f"{PICTURE_VERSION})",
        )
    version2 = size >= 5 and payload[4] == PICTURE_VERSION
    head = HEADER_SIZE + (picture_size.FIELD.size if version2 else 0)
    if size < head:
        raise PayloadLengthError(f"payload of {size} bytes is shorter than its {head}-byte header")
    _, _, flags, channels, z_bytes, words, esc_count, esc_bytes = _HEADER.unpack_from(payload)
    if flags != 0 or channels == 0:
        raise PayloadFormatError(
            f"payload: WAIH flags {flags:#04x} or y channels {channels} invalid"
        )
    picture = picture_size.read(payload, HEADER_SIZE) if version2 else None
    if head + z_bytes > size:
        raise PayloadLengthError(f"payload: the side latent's {z_bytes} bytes are not all present")
    z = waip.read_header(bytes(payload[head : head + z_bytes]), limits=limits)
    header = HyperHeader(channels, z_bytes, words, esc_count, esc_bytes, z, picture)
    check_latent_shape(header.y_shape, limits, what="payload: latent")
    _, c, h, w = header.y_shape
    if esc_count > c * h * w or not esc_count <= esc_bytes <= 5 * esc_count:
        raise PayloadFormatError(f"payload: {esc_count} escapes in {esc_bytes} bytes")
    total = head + z_bytes + 4 * words + esc_bytes
    if total != size:
        error = PayloadTrailing if total < size else PayloadLengthError
        raise error(f"payload: header declares {total} bytes, {size} present")
    return header


def symbols_digest(z: np.ndarray, y: np.ndarray) -> str:
    """BLAKE3 (hex) of z's symbols then y's, each int32 little-endian in C, H, W order."""
    h = blake3.blake3()
    for s in (z, y):
        h.update(np.ascontiguousarray(s, dtype="<i4").tobytes())
    return h.hexdigest()


def encode(
    z: np.ndarray,
    y: np.ndarray,
    indexes: np.ndarray,
    z_tables: EntropyTables,
    y_tables: EntropyTables,
    *,
    picture: tuple[int, int] | None = None,
) -> bytes:
    """The payload of symbols ``z`` (1, Cz, h, w) and ``y`` (1, Cy, 4h, 4w), ``indexes`` being
    y's table indexes (what the set's hyper-synthesis gives for ``z``).  With ``picture``
    (width, height), version 2, which carries the coded picture's size; without, version 1."""
    import constriction

    z_payload = waip.encode(z, z_tables)
    if y.ndim != 4 or y.shape[2:] != (UPSAMPLING * z.shape[2], UPSAMPLING * z.shape[3]):
        raise SymbolsError(f"y of shape {y.shape} for z of shape {z.shape}")
    if indexes.shape != y.shape:
        raise SymbolsError(f"indexes of shape {indexes.shape} for y of shape {y.shape}")
    flat, idx = np.ascontiguousarray(y).reshape(-1), np.ascontiguousarray(indexes).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= y_tables.channels):
        raise SymbolsError("an index names no table")
    offsets, escape = y_tables.offsets.astype(np.int64), y_tables.cdf_lengths.astype(np.int64) - 2
    coder = constriction.stream.stack.AnsCoder()
    coder.encode_reverse(np.array(y.shape[2:], dtype=np.int32), waip._shape_model())
    models = y_tables.models()
    raws = []
    # grouped by index (C, H, W order within a group), the last group first; a group at a
    # time, so the temporaries are one group's
    for k in range(y_tables.channels - 1, -1, -1):
        index = flat[idx == k].astype(np.int64) - offsets[k]
        if not index.size:
            continue
        low, high = index < 0, index >= escape[k]
        raws.append(np.where(low, -2 * index - 1, 2 * (index - escape[k]))[low | high])
        coder.encode_reverse(np.where(low | high, escape[k], index).astype(np.int32), models[k])
    raw = np.concatenate(raws[::-1]) if raws else np.zeros(0, dtype=np.int64)
    words: bytes = coder.get_compressed().astype("<u4", copy=False).tobytes()
    escapes = write_varints(raw.astype(np.uint64))
    version = VERSION if picture is None else PICTURE_VERSION
    head = _HEADER.pack(
        MAGIC, version, 0, y.shape[1], len(z_payload), len(words) // 4, int(raw.size), len(escapes)
    )
    size = b"" if picture is None else picture_size.to_bytes(picture)
    return head + size + z_payload + words + escapes


def decode_z(payload: bytes, header: HyperHeader, z_tables: EntropyTables) -> npt.NDArray[np.int32]:
    """The side latent's symbols (1, Cz, h, w)."""
    start = header.header_size
    section = bytes(payload[start : start + header.z_bytes])
    return waip.decode(section, z_tables, header=header.z)


def decode_y(
    payload: bytes, header: HyperHeader, indexes: np.ndarray, y_tables: EntropyTables
) -> npt.NDArray[np.int32]:
    """y's symbols, given the table index of every position (the hyper-synthesis's)."""
    if indexes.shape != header.y_shape:
        raise PayloadTablesMismatch(f"indexes of shape {indexes.shape}, y is {header.y_shape}")
    try:
        return _decode_y(payload, header, indexes, y_tables)
    except CodecError:
        raise
    except Exception as exc:
        raise PayloadStreamError(f"payload: y's stream does not decode: {exc}") from exc


def _decode_y(
    payload: bytes, header: HyperHeader, indexes: np.ndarray, y_tables: EntropyTables
) -> npt.NDArray[np.int32]:
    import constriction

    start = header.header_size + header.z_bytes
    words = np.frombuffer(payload, dtype="<u4", count=header.y_words, offset=start)
    if header.y_words and words[-1] == 0:
        raise PayloadStreamError("payload: y's rANS stream ends in a zero word")
    coder = constriction.stream.stack.AnsCoder(words.astype(np.uint32))
    models = y_tables.models()
    idx = indexes.reshape(-1).astype(np.int64)
    order = np.argsort(idx, kind="stable")
    groups = idx[order]
    bounds = np.searchsorted(groups, np.arange(y_tables.channels + 1))
    table_index = np.empty(idx.size, dtype=np.int32)
    for k in range(y_tables.channels):
        n = int(bounds[k + 1] - bounds[k])
        if n:
            words_left, state = coder.pos()
            if words_left == 0 and state < 1 << 24:
                raise PayloadStreamError("payload: y's rANS stream ends early; " + FLOAT_HS_CAUSE)
            table_index[bounds[k] : bounds[k + 1]] = coder.decode(models[k], n)
    shape = coder.decode(waip._shape_model(), 2)
    _, _, h, w = header.y_shape
    if shape[0] != h or shape[1] != w or not coder.is_empty():
        raise PayloadStreamError(
            "payload: y's rANS stream does not hold exactly its symbols; " + FLOAT_HS_CAUSE
        )
    escape = y_tables.cdf_lengths.astype(np.int64)[groups] - 2
    values = table_index.astype(np.int64) + y_tables.offsets.astype(np.int64)[groups]
    where = np.flatnonzero(table_index == escape)
    if where.size != header.y_escape_count:
        raise PayloadEscapeInvalid(
            f"payload: y's stream holds {where.size} escapes, the header {header.y_escape_count}",
        )
    if where.size:
        at = start + 4 * header.y_words
        raw = read_varints(bytes(payload[at : at + header.y_escape_bytes]), where.size)
        g = groups[where]
        off = y_tables.offsets.astype(np.int64)[g]
        esc = y_tables.cdf_lengths.astype(np.int64)[g] - 2
        values[where] = (
            np.where(
                raw & 1 == 1, -((raw + 1) >> 1).astype(np.int64), (raw >> 1).astype(np.int64) + esc
            )
            + off
        )
        if int(values.min()) < _INT32_MIN or int(values.max()) > _INT32_MAX:
            raise PayloadEscapeInvalid("payload: an escaped symbol is outside int32")
    out = np.empty(idx.size, dtype=np.int32)
    out[order] = values.astype(np.int32)
    return out.reshape(header.y_shape)
