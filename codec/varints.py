"""The escape sections' integers (docs/payload.md): minimal LEB128 varints, 7 bits a byte, least
significant first, at most :data:`MAX_VARINT_BYTES` each; shared by the factorized payload
(``codec/payload.py``) and the hyperprior's (``codec/hyperprior_payload.py``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from wai_dispatch.codec.errors import PayloadEscapeInvalid

MAX_VARINT_BYTES = 5  # 7 * 5 = 35 bits hold every escape of an int32 symbol


def write_varints(values: npt.NDArray[np.uint64]) -> bytes:
    """LEB128: 7 bits a byte, least significant first, high bit set on all but the last."""
    if values.size == 0:
        return b""
    nbytes = np.ones(values.shape, dtype=np.int64)
    for k in range(1, MAX_VARINT_BYTES):
        nbytes += values >= np.uint64(1 << (7 * k))
    ends = np.cumsum(nbytes)
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    starts = ends - nbytes
    for k in range(MAX_VARINT_BYTES):
        has = nbytes > k
        chunk = (values[has] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (nbytes[has] > k + 1).astype(np.uint64) << np.uint64(7)
        out[starts[has] + k] = (chunk | more).astype(np.uint8)
    return out.tobytes()


def read_varints(data: bytes, count: int) -> npt.NDArray[np.uint64]:
    """Exactly ``count`` minimal LEB128 values filling ``data``; else payload_escape_invalid."""
    b = np.frombuffer(data, dtype=np.uint8)
    last = np.flatnonzero(b < 0x80)
    if last.size != count or last[-1] != b.size - 1:
        raise PayloadEscapeInvalid(
            f"payload: the escape section does not hold exactly {count} values",
        )
    starts = np.concatenate(([0], last[:-1] + 1))
    lengths = last - starts + 1
    # Minimal form only (a final 0x00 after a continuation is padding), so that a symbol array
    # has exactly one payload.
    if int(lengths.max()) > MAX_VARINT_BYTES or bool(np.any((lengths > 1) & (b[last] == 0))):
        raise PayloadEscapeInvalid(
            "payload: an escape value is not a minimal varint of at most 5 bytes",
        )
    group = np.repeat(np.arange(count), lengths)
    position = np.arange(b.size) - starts[group]
    parts = (b & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.add.reduceat(parts, starts).astype(np.uint64)
