"""Issue 29, item 8: a damaged picture is refused naming the real problem (it was "not a
picture this command reads (PNG, JPEG, PPM)" for a JPEG cut at 10% or a PNG with a bad CRC,
and a PNG whose pixel data's CRC failed decoded without a word)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from wai_dispatch.codec.picture_read import PictureInvalid, read_picture


def _saved(kind: str) -> bytes:
    rng = np.random.default_rng(7)
    pixels = (rng.random((48, 64, 3)) * 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, kind)
    return out.getvalue()


PNG = _saved("PNG")
JPEG = _saved("JPEG")
PPM = _saved("PPM")
IDAT = PNG.index(b"IDAT") - 4  # the chunk's first byte (its length)


def _refused(data: bytes) -> str:
    with pytest.raises(PictureInvalid) as caught:
        read_picture(data, lambda w, h: None)
    assert caught.value.code == "picture_invalid"
    return caught.value.message


def _flipped(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0xFF
    return bytes(out)


def test_the_undamaged_ones_read() -> None:
    for data in (PNG, JPEG, PPM):
        assert read_picture(data, lambda w, h: None).shape == (48, 64, 3)


def test_a_png_with_a_bad_crc_names_the_chunk() -> None:
    assert _refused(_flipped(PNG, 8 + 8 + 13)) == (
        "a damaged PNG: its IHDR chunk at byte 8 fails its CRC check"
    )
    length = int.from_bytes(PNG[IDAT : IDAT + 4], "big")
    crc_at = IDAT + 8 + length
    assert _refused(_flipped(PNG, crc_at)) == (
        f"a damaged PNG: its IDAT chunk at byte {IDAT} fails its CRC check"
    )
    assert "IDAT chunk" in _refused(_flipped(PNG, IDAT + 20))  # its data, not its CRC


def test_a_png_cut_short_says_where() -> None:
    message = _refused(PNG[: IDAT + 100])
    assert message.startswith(f"a PNG cut short: its IDAT chunk at byte {IDAT} holds ")
    assert message.endswith("the file ends 92 bytes into it")
    assert (
        _refused(PNG[: len(PNG) - 12])
        == f"a PNG cut short at byte {len(PNG) - 12:,}: no IEND chunk"
    )


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_a_jpeg_cut_short_is_a_truncated_jpeg(fraction: float) -> None:
    cut = JPEG[: int(len(JPEG) * fraction)]
    assert _refused(cut).startswith(f"a truncated or damaged JPEG file ({len(cut):,} bytes): its ")


def test_a_ppm_cut_short_is_a_truncated_ppm() -> None:
    assert _refused(PPM[:7]).startswith("a truncated or damaged PPM file (7 bytes): its header")
    assert _refused(PPM[:100]).startswith("a truncated or damaged PPM file (100 bytes): its pixels")


def test_what_is_no_picture_says_so() -> None:
    assert _refused(b"GIF89a" + bytes(40)) == (
        "not a picture this command reads (PNG, JPEG, PPM): its first bytes are no PNG, JPEG or "
        "PPM signature"
    )
