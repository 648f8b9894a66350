"""Payload version 2 (docs/payload.md, "Version 2: the picture's size"): ``WAIP`` and ``WAIH``
carry the coded picture's width and height as two u32 right after their 24-byte version-1
header; everything else is version 1's, shifted by 8 bytes. Golden bytes for both, the same
symbols as version 1, typed errors for a bad picture field, and version 1 unchanged."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec import payload as waip
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.tables import EntropyTables, laplacian_tables
from wai_dispatch.service.decoding.results import coded_picture, crop_to_picture

GOLDEN = Path(__file__).parent / "golden" / "payload"
REGEN = os.environ.get("WAI_REGEN_GOLDEN") == "1"
PICTURE = (451, 300)
Z_TABLES = laplacian_tables(4, seed=1)
Y_TABLES = laplacian_tables(6, seed=2)


def _golden(name: str, produce: bytes) -> bytes:
    path = GOLDEN / name
    if REGEN:
        path.write_bytes(produce)
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run with WAI_REGEN_GOLDEN=1 to write it")
    return path.read_bytes()


@pytest.fixture(scope="module")
def small() -> EntropyTables:
    return EntropyTables.from_json((GOLDEN / "tables.json").read_bytes())


def _symbols() -> np.ndarray:
    rng = np.random.default_rng(30)
    return rng.integers(-40, 41, size=(1, 3, 19, 29)).astype(np.int32)


def _hyper() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(31)
    z = rng.integers(-6, 7, size=(1, 4, 2, 3)).astype(np.int32)
    y = rng.integers(-20, 21, size=(1, 5, 8, 12)).astype(np.int32)
    return z, y, rng.integers(0, 6, size=y.shape).astype(np.int32)


def test_waip_version_2_golden(small: EntropyTables) -> None:
    symbols = _symbols()
    payload = waip.encode(symbols, small, picture=PICTURE)
    assert payload == _golden("picture.payload", payload)
    v1 = waip.encode(symbols, small)
    magic, version = struct.unpack_from("<4sB", payload)
    assert (magic, version) == (b"WAIP", 2)
    assert struct.unpack_from("<II", payload, 24) == PICTURE
    # version 1's header (but the version byte) and stream, 8 bytes later
    assert payload[5:24] == v1[5:24] and payload[32:] == v1[24:]
    header = waip.read_header(payload)
    assert header.picture == PICTURE and header.header_size == 32
    assert header.total_bytes == len(payload)
    assert np.array_equal(waip.decode(payload, small), symbols)
    assert waip.read_header(v1).picture is None
    assert coded_picture(payload) == PICTURE and coded_picture(v1) is None


def test_waih_version_2_golden() -> None:
    z, y, index = _hyper()
    payload = waih.encode(z, y, index, Z_TABLES, Y_TABLES, picture=(45, 30))
    assert payload == _golden("picture.waih", payload)
    v1 = waih.encode(z, y, index, Z_TABLES, Y_TABLES)
    assert payload[:5] == b"WAIH\x02" and payload[5:24] == v1[5:24] and payload[32:] == v1[24:]
    header = waih.read_header(payload)
    assert header.picture == (45, 30) and header.as_latent_header().picture == (45, 30)
    assert np.array_equal(waih.decode_z(payload, header, Z_TABLES), z)
    assert np.array_equal(waih.decode_y(payload, header, index, Y_TABLES), y)
    assert coded_picture(payload) == (45, 30) and coded_picture(v1) is None


@pytest.mark.parametrize("kind", ["waip", "waih"])
def test_an_empty_picture_is_a_bad_header(small: EntropyTables, kind: str) -> None:
    if kind == "waip":
        payload = bytearray(waip.encode(_symbols(), small, picture=PICTURE))
    else:
        z, y, index = _hyper()
        payload = bytearray(waih.encode(z, y, index, Z_TABLES, Y_TABLES, picture=(45, 30)))
    payload[24:28] = b"\0\0\0\0"
    read = waip.read_header if kind == "waip" else waih.read_header
    with pytest.raises(CodecError) as err:
        read(bytes(payload))
    assert err.value.code == "payload_header_invalid"


def test_a_truncated_version_2_header_and_an_unknown_version(small: EntropyTables) -> None:
    payload = waip.encode(_symbols(), small, picture=PICTURE)
    with pytest.raises(CodecError) as err:
        waip.read_header(payload[:28])
    assert err.value.code == "payload_truncated"
    with pytest.raises(CodecError) as err:
        waip.read_header(payload[:4] + b"\x03" + payload[5:])
    assert err.value.code == "payload_version"
    assert "only 1 and 2" in err.value.message
    with pytest.raises(CodecError):
        waip.encode(_symbols(), small, picture=(0, 3))


def test_the_crop_is_the_top_left_region(small: EntropyTables) -> None:
    rgb = np.arange(304 * 464 * 3, dtype=np.uint32).astype(np.uint8).reshape(304, 464, 3)
    payload = waip.encode(_symbols(), small, picture=PICTURE)
    out = crop_to_picture(rgb, payload)
    assert out.shape == (300, 451, 3) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, rgb[:300, :451])
    assert crop_to_picture(rgb, waip.encode(_symbols(), small)) is rgb
    with pytest.raises(CodecError) as err:
        crop_to_picture(rgb[:200], payload)
    assert err.value.code == "payload_header_invalid"


def test_version_1_golden_is_unchanged(small: EntropyTables) -> None:
    """The version-1 golden payload still reads as version 1, with no picture."""
    data = (GOLDEN / "small.payload").read_bytes()
    header = waip.read_header(data)
    assert header.version == 1 and header.picture is None and header.header_size == 24
