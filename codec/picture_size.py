"""The coded picture's size in a version-2 payload header (docs/payload.md): its width and height,
u32 little-endian each, right after the 24-byte version-1 header of a ``WAIP``
(:mod:`codec.payload`) or ``WAIH`` (:mod:`codec.hyperprior_payload`) payload. A decode crops the
synthesis's output to it (:mod:`service.decoding.results`)."""

from __future__ import annotations

import struct

from wai_dispatch.codec.errors import PayloadFormatError, SymbolsError

#: The field: width, then height.
FIELD = struct.Struct("<II")


def read(payload: bytes, offset: int) -> tuple[int, int]:
    """A version-2 header's picture (width, height) at ``offset``; each at least 1."""
    width, height = FIELD.unpack_from(payload, offset)
    if width == 0 or height == 0:
        raise PayloadFormatError(f"payload: empty picture {width}×{height}")
    return width, height


def to_bytes(picture: tuple[int, int]) -> bytes:
    """A version-2 header's picture field; ``SymbolsError`` for a size no header holds."""
    width, height = picture
    if not (1 <= width <= 0xFFFFFFFF and 1 <= height <= 0xFFFFFFFF):
        raise SymbolsError(f"picture {width}×{height}: each side must be 1 to 2^32 − 1")
    return FIELD.pack(width, height)
