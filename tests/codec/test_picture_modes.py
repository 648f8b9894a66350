"""Issue 29, item 7: pictures read exactly. Every mode Pillow opens from a PNG, JPEG or PPM is
converted to RGB8 by the rule docs/encode.md states (16-bit grey scaled like 16-bit RGB), or
refused by name: one picture per mode, its RGB8 mean within 1% of the source's."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from wai_dispatch.codec.picture_read import (
    CONVERTED,
    SIXTEEN_BIT_GREY,
    PictureInvalid,
    read_picture,
)

H, W = 40, 56
yy, xx = np.mgrid[0:H, 0:W]
SRC = np.stack([xx * 255 // (W - 1), yy * 255 // (H - 1), (xx + yy) * 255 // (H + W - 2)], 2)
SRC = SRC.astype(np.uint8)
GREY = SRC.mean(axis=2).round().astype(np.uint8)
ALPHA = ((xx * 7 + yy * 3) % 256).astype(np.uint8)


def _saved(image: object, fmt: str, **kw: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **kw)  # type: ignore[attr-defined]
    return out.getvalue()


def _bilevel() -> tuple[bytes, float]:
    image = Image.fromarray(GREY).convert("1", dither=Image.Dither.NONE)
    return _saved(image, "PNG"), float(np.asarray(image, np.float64).mean() * 255)


def _palette(transparency: bool) -> tuple[bytes, float]:
    """A palette PNG (with a transparent entry: a tRNS chunk, still mode P)."""
    image = Image.fromarray(SRC).quantize(256)
    expected = float(np.asarray(image.convert("RGB"), np.float64).mean())
    kw = {"transparency": 0} if transparency else {}
    return _saved(image, "PNG", **kw), expected


CASES: dict[str, Callable[[], tuple[bytes, float]]] = {
    "1": _bilevel,
    "L": lambda: (_saved(Image.fromarray(GREY), "PNG"), float(GREY.mean())),
    "LA": lambda: (
        _saved(Image.fromarray(np.stack([GREY, ALPHA], 2), "LA"), "PNG"),
        float(GREY.mean()),
    ),
    "P": lambda: _palette(transparency=False),
    "P+tRNS": lambda: _palette(transparency=True),
    "RGB": lambda: (_saved(Image.fromarray(SRC), "PNG"), float(SRC.mean())),
    "RGBA": lambda: (
        _saved(Image.fromarray(np.dstack([SRC, ALPHA]), "RGBA"), "PNG"),
        float(SRC.mean()),
    ),
    "CMYK": lambda: (
        _saved(Image.fromarray(SRC).convert("CMYK"), "JPEG", quality=98),
        float(SRC.mean()),
    ),
    "I;16": lambda: (
        _saved(Image.fromarray(GREY.astype(np.uint16) * 257), "PNG"),
        float(GREY.mean()),
    ),
    "I": lambda: (  # a 16-bit PGM: Pillow opens it as mode I
        _saved(Image.fromarray(GREY.astype(np.uint16) * 257), "PPM"),
        float(GREY.mean()),
    ),
}


def _read(data: bytes) -> npt.NDArray[np.uint8]:
    return read_picture(data, lambda w, h: None)


@pytest.mark.parametrize("mode", sorted(CASES))
def test_each_mode_reads_with_its_mean_kept(mode: str) -> None:
    data, expected = CASES[mode]()
    assert Image.open(io.BytesIO(data)).mode == mode.split("+")[0]  # the mode it names
    rgb = _read(data)
    assert rgb.shape == (H, W, 3) and rgb.dtype == np.uint8
    assert abs(float(rgb.mean()) - expected) <= 0.01 * expected, (mode, rgb.mean(), expected)


def test_sixteen_bit_grey_is_scaled_like_sixteen_bit_rgb() -> None:
    """The issue's case: a 16-bit grey PNG was 99.6% white (Pillow clips I;16 at 255)."""
    ramp = (np.arange(256, dtype=np.uint16) * 257).reshape(16, 16)
    rgb = _read(_saved(Image.fromarray(ramp), "PNG"))
    assert (rgb[..., 0] == np.arange(256).reshape(16, 16)).all()
    assert (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all()
    assert (rgb == 255).mean() < 0.01


def test_the_modes_covered_are_every_rule() -> None:
    assert {case.split("+")[0] for case in CASES} <= CONVERTED | SIXTEEN_BIT_GREY
    assert set(CASES) >= SIXTEEN_BIT_GREY & {"I;16", "I"}


def test_floating_point_samples_are_refused_by_name() -> None:
    image = Image.fromarray(GREY.astype(np.float32) / 255)
    data = _saved(image, "PPM")  # a PFM: Pillow's PPM reader opens it as mode F
    assert Image.open(io.BytesIO(data)).mode == "F"
    with pytest.raises(PictureInvalid, match=r"^a picture of mode F \(Pillow's name\)"):
        _read(data)
