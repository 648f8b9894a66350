"""A picture to encode (docs/encode.md): PNG, JPEG or PPM read through Pillow as RGB8 (H×W×3),
its size checked by the caller from the file's header **before** any pixel is
decoded, so a small file that claims a huge picture (a decompression bomb) costs nothing.

Errors (each a :class:`codec.errors.CodecError` with a stable ``code``)::

    PictureInvalid      picture_invalid: not a PNG, JPEG or PPM, or its pixels do not decode
    PictureOverLimits   picture_over_limits: wider or taller than the bound, named in the message
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from wai_dispatch.codec.codes import CodecCode
from wai_dispatch.codec.errors import CodecError

__all__ = ["FORMATS", "PictureInvalid", "PictureOverLimits", "read_picture"]

#: Pillow's names of the formats ``encode`` reads; any other is ``picture_invalid``.
FORMATS = ("PNG", "JPEG", "PPM")


class PictureInvalid(CodecError):
    code = CodecCode.PICTURE_INVALID


class PictureOverLimits(CodecError):
    code = CodecCode.PICTURE_OVER_LIMITS


def read_picture(data: bytes, check_size: Callable[[int, int], None]) -> npt.NDArray[np.uint8]:
    """The picture in ``data`` as RGB8 (H×W×3, C order), any mode converted to RGB by Pillow
    (an alpha channel dropped, a palette or grey expanded). ``check_size(width, height)`` is
    called with the size the header states before any pixel is decoded; it raises
    :class:`PictureOverLimits` (or any typed error) to refuse the picture."""
    from PIL import Image, UnidentifiedImageError  # lazy: only encode reads pictures

    with warnings.catch_warnings():
        # Pillow's own bomb guard warns (or raises) past ~89 M pixels; ours is stricter and
        # named, so a warning here is the same refusal.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=list(FORMATS))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise PictureOverLimits(f"the picture is over Pillow's bound: {exc}") from None
        except UnidentifiedImageError:
            raise PictureInvalid(
                f"not a picture this command reads ({', '.join(FORMATS)})"
            ) from None
        except Exception as exc:  # a header Pillow's parser refuses
            raise PictureInvalid(f"the picture's header does not read: {exc}") from None
        with image:
            width, height = image.size
            check_size(width, height)
            try:
                image.load()
                rgb = image.convert("RGB")
            except Exception as exc:  # truncated or corrupt pixel data
                raise PictureInvalid(f"the picture's pixels do not decode: {exc}") from None
    out = np.array(rgb, dtype=np.uint8)  # a copy: writable, which torch.from_numpy wants
    if out.shape != (height, width, 3):
        raise PictureInvalid(f"the picture decodes to {out.shape}, not {height}×{width}×3")
    return np.ascontiguousarray(out)
