"""The picture's own size (docs/payload.md, version 2): a payload that carries the coded
picture's width and height is decoded to that size, the synthesis's output cropped to its
top-left region after the synthesis ran (whole or in tiles); a version-1 payload is decoded to
the synthesis's whole output, as before."""

from __future__ import annotations

import numpy as np

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec import payload as waip
from wai_dispatch.codec import picture_size
from wai_dispatch.codec.payload import PayloadFormatError

__all__ = ["coded_picture", "crop_to_picture"]


def coded_picture(payload: bytes) -> tuple[int, int] | None:
    """The (width, height) a version-2 ``WAIP`` or ``WAIH`` payload carries (both hold it right
    after their 24-byte version-1 header), else ``None``. Reads a payload whose header its
    entropy stage has already checked."""
    if len(payload) < waip.PICTURE_HEADER_SIZE:
        return None
    magic, version = bytes(payload[:4]), payload[4]
    versions = ((waip.MAGIC, waip.PICTURE_VERSION), (waih.MAGIC, waih.PICTURE_VERSION))
    if (magic, version) not in versions:
        return None
    return picture_size.read(payload, waip.HEADER_SIZE)


def crop_to_picture(rgb: np.ndarray, payload: bytes) -> np.ndarray:
    """``rgb`` (H×W×3, the synthesis's output) cropped to the picture ``payload`` carries; a
    picture larger than the output is ``payload_header_invalid``."""
    picture = coded_picture(payload)
    if picture is None:
        return rgb
    width, height = picture
    if width > rgb.shape[1] or height > rgb.shape[0]:
        raise PayloadFormatError(
            f"payload: its picture {width}×{height} is larger than the synthesis's output "
            f"{rgb.shape[1]}×{rgb.shape[0]}"
        )
    if (width, height) == (rgb.shape[1], rgb.shape[0]):
        return rgb
    return np.ascontiguousarray(rgb[:height, :width])
