"""The decoded picture: the synthesis output as RGB8 (docs/decoding.md), its BLAKE3 digest,
and its PNG."""

from __future__ import annotations

import io

import blake3
import numpy as np

from wai_dispatch.codec.layout import DEFAULT_PNG_LEVEL

_BAND_ROWS = 256


def to_rgb8(x_hat: np.ndarray) -> np.ndarray:
    """The synthesis output (1×3×H×W float) as RGB8 (H×W×3): clamp to [0, 1], multiply by 255
    in float32, round half to even, cast (docs/decoding.md). A NaN sample (a latent of
    extreme escapes can drive the networks there) is 0, as ±inf clamp to 1 and 0."""
    x = np.asarray(x_hat, dtype=np.float32)
    if x.ndim != 4 or x.shape[0] != 1 or x.shape[1] != 3:
        raise ValueError(f"synthesis output has shape {x.shape}, not 1×3×H×W")
    height = int(x.shape[2])
    out = np.empty((height, int(x.shape[3]), 3), dtype=np.uint8)
    # In bands of rows: the same samples as one pass, without a whole picture's float
    # temporaries (a 4096×4096 picture's are 200 MB each).
    for y0 in range(0, height, _BAND_ROWS):
        band = x[0, :, y0 : y0 + _BAND_ROWS]
        band = np.where(np.isnan(band), np.float32(0.0), band)
        scaled = np.clip(band, np.float32(0.0), np.float32(1.0)) * np.float32(255.0)
        out[y0 : y0 + _BAND_ROWS] = np.rint(scaled).astype(np.uint8).transpose(1, 2, 0)
    return out


def rgb_digest(rgb: np.ndarray) -> str:
    """BLAKE3 (hex) of the RGB8 samples, row by row, R G B per pixel (H×W×3, C order)."""
    return blake3.blake3(np.ascontiguousarray(rgb, dtype=np.uint8).tobytes()).hexdigest()


def to_png(rgb: np.ndarray, level: int = DEFAULT_PNG_LEVEL) -> bytes:
    """The RGB8 picture as PNG, zlib at ``level`` (0 stored … 9 smallest), no optimisation
    pass (Pillow's ``optimize`` tries levels and filters again)."""
    from PIL import Image  # lazy: only a decode that writes a picture needs Pillow

    buf = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(buf, format="PNG", optimize=False, compress_level=level)
    return buf.getvalue()
