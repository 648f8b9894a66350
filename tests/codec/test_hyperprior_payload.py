"""The hyperprior payload (``WAIH``, docs/payload.md "Hyperprior payload"): exact round trips of
z and y with escapes, the y symbols grouped by table index, a pinned digest order, and one typed
error for each class of bad header."""

from __future__ import annotations

import struct

import blake3
import numpy as np
import pytest

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.tables import laplacian_tables
from wai_dispatch.setfacts.limits import Limits

Z_TABLES = laplacian_tables(4, seed=1)
Y_TABLES = laplacian_tables(6, seed=2)


def _symbols(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.integers(-6, 7, size=(1, 4, 2, 3)).astype(np.int32)
    y = rng.integers(-20, 21, size=(1, 5, 8, 12)).astype(np.int32)
    y[0, 0, 0, 0], y[0, 1, 2, 3] = 4000, -(1 << 31)  # escapes, the int32 end included
    index = rng.integers(0, 6, size=y.shape).astype(np.int32)
    return z, y, index


def test_round_trip_with_escapes() -> None:
    z, y, index = _symbols(0)
    payload = waih.encode(z, y, index, Z_TABLES, Y_TABLES)
    header = waih.read_header(payload)
    assert header.y_shape == y.shape and header.z.shape == z.shape and header.y_escape_count >= 2
    assert np.array_equal(waih.decode_z(payload, header, Z_TABLES), z)
    assert np.array_equal(waih.decode_y(payload, header, index, Y_TABLES), y)
    assert header.as_latent_header().shape == y.shape


def test_other_indexes_decode_other_symbols() -> None:
    """One scale index different (what a float hyper-synthesis may give) and y decodes to other
    symbols, or not at all: the indexes are part of the stream's meaning."""
    z, y, index = _symbols(1)
    payload = waih.encode(z, y, index, Z_TABLES, Y_TABLES)
    header = waih.read_header(payload)
    other = index.copy()
    other[0, 2, 4, 5] = (other[0, 2, 4, 5] + 1) % 6
    try:
        got = waih.decode_y(payload, header, other, Y_TABLES)
    except CodecError:
        return
    assert not np.array_equal(got, y)


def test_digest_is_z_then_y_int32_le() -> None:
    z, y, _ = _symbols(2)
    expected = blake3.blake3(z.astype("<i4").tobytes() + y.astype("<i4").tobytes()).hexdigest()
    assert waih.symbols_digest(z, y) == expected
    assert waih.symbols_digest(z.astype(np.int64), y) == expected


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda p: b"WAIX" + p[4:], "payload_magic"),
        (lambda p: p[:4] + b"\x03" + p[5:], "payload_version"),
        (lambda p: p[:5] + b"\x01" + p[6:], "payload_header_invalid"),
        (lambda p: p[:-1], "payload_truncated"),
        (lambda p: p + b"\0", "payload_trailing"),
        (lambda p: p[:10], "payload_truncated"),
    ],
)
def test_bad_headers_are_typed(mutate: object, code: str) -> None:
    z, y, index = _symbols(3)
    payload = waih.encode(z, y, index, Z_TABLES, Y_TABLES)
    with pytest.raises(CodecError) as err:
        waih.read_header(mutate(payload))  # type: ignore[operator]
    assert err.value.code == code


def test_limits_are_checked_from_the_header() -> None:
    z, y, index = _symbols(4)
    payload = waih.encode(z, y, index, Z_TABLES, Y_TABLES)
    with pytest.raises(CodecError) as err:
        waih.read_header(payload, limits=Limits(max_latent_width=8))
    assert err.value.code == "payload_shape_over_limits"


def test_a_damaged_y_stream_is_typed() -> None:
    z, y, index = _symbols(5)
    payload = bytearray(waih.encode(z, y, index, Z_TABLES, Y_TABLES))
    header = waih.read_header(bytes(payload))
    at = waih.HEADER_SIZE + header.z_bytes + 8
    payload[at] ^= 0x55
    with pytest.raises(CodecError) as err:
        got = waih.decode_y(bytes(payload), header, index, Y_TABLES)
        assert np.array_equal(got, y)  # a flip that still decodes must give other symbols
    assert err.value.code in ("payload_stream_invalid", "payload_escape_invalid")


def test_header_layout() -> None:
    z, y, index = _symbols(6)
    payload = waih.encode(z, y, index, Z_TABLES, Y_TABLES)
    magic, version, flags, channels, z_bytes = struct.unpack_from("<4sBBHI", payload)
    assert (magic, version, flags, channels) == (b"WAIH", 1, 0, 5)
    assert payload[waih.HEADER_SIZE : waih.HEADER_SIZE + 4] == b"WAIP"
    assert z_bytes == waih.read_header(payload).z.total_bytes
