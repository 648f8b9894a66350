"""A picture to encode (docs/encode.md): PNG, JPEG or PPM read through Pillow as RGB8 (H×W×3),
its size checked from the file's header **before** any pixel is decoded, so a small file that
claims a huge picture (a decompression bomb) costs nothing (:class:`PictureInvalid`,
:class:`PictureOverLimits`).
"""

from __future__ import annotations

import io
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch.errors import TooLarge

#: Pillow's names of the formats ``encode`` reads; any other is ``picture_invalid``.
FORMATS = ("PNG", "JPEG", "PPM")


class PictureInvalid(CodecError):
    """an encode input that is not a PNG, JPEG or PPM picture, or whose pixels do not decode"""

    code = "picture_invalid"


class PictureOverLimits(TooLarge, CodecError):
    """a picture whose size (read from its header, before its pixels) the set's decode limits do
    not take; the limit is named"""

    code = "picture_over_limits"


#: Modes Pillow converts to RGB8 itself: bilevel (0 or 255), grey, palette, RGB; an alpha or
#: padding channel is dropped (not composited); CMYK and YCbCr by Pillow's conversion.
CONVERTED = frozenset(
    {"1", "L", "LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr"}
)
#: 16-bit grey (PNG's, and PGM's over 255 as Pillow's mode I): scaled like 16-bit RGB,
#: ``round(v × 255 / 65535)``, into each of R, G and B. Pillow's own conversion clips them.
SIXTEEN_BIT_GREY = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I"})


def _rgb8(image: Any) -> npt.NDArray[np.uint8]:
    """``image`` (its pixels loaded) as RGB8 by the rule of its mode, or
    :class:`PictureInvalid` naming a mode no rule reads (floating-point samples, say)."""
    mode = image.mode
    if mode in SIXTEEN_BIT_GREY:
        grey = np.asarray(image).astype(np.int64)
        if grey.size and (grey.min() < 0 or grey.max() > 65535):
            raise PictureInvalid(f"a picture of mode {mode} with samples outside 0–65535")
        scaled = ((grey * 255 + 32767) // 65535).astype(np.uint8)
        return np.repeat(scaled[..., None], 3, axis=2)
    if mode not in CONVERTED:
        raise PictureInvalid(
            f"a picture of mode {mode} (Pillow's name) is not read: no rule maps its samples "
            "to RGB8 (docs/encode.md, Pictures)"
        )
    return np.array(image.convert("RGB"), dtype=np.uint8)  # a copy: writable


def read_picture(data: bytes, check_size: Callable[[int, int], None]) -> npt.NDArray[np.uint8]:
    """The picture in ``data`` as RGB8 (H×W×3, C order), each mode by its rule
    (:data:`CONVERTED`, :data:`SIXTEEN_BIT_GREY`; any other refused by name).
    ``check_size(width, height)`` is called with the size the header states before any pixel
    is decoded; it raises :class:`PictureOverLimits` (or any typed error) to refuse it."""
    from PIL import Image, UnidentifiedImageError  # lazy: only encode reads pictures

    if sniff(data) == "PNG":
        check_png_chunks(data)  # Pillow checks no IDAT CRC: a damaged PNG would decode
    with warnings.catch_warnings():
        # Pillow's own bomb guard warns (or raises) past ~89 M pixels; ours is stricter and
        # named, so a warning here is the same refusal.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=list(FORMATS))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise PictureOverLimits(f"the picture is over Pillow's bound: {exc}") from None
        except UnidentifiedImageError:
            kind = sniff(data)
            if kind is not None:  # its signature says which: damaged or cut short
                raise PictureInvalid(_damaged(kind, data, "header", _reason(kind, data))) from None
            raise PictureInvalid(
                f"not a picture this command reads ({', '.join(FORMATS)}): its first bytes "
                "are no PNG, JPEG or PPM signature"
            ) from None
        except Exception as exc:  # a header Pillow's parser refuses
            raise PictureInvalid(_damaged(sniff(data), data, "header", exc)) from None
        with image:
            width, height = image.size
            check_size(width, height)
            try:
                image.load()
            except Exception as exc:  # truncated or corrupt pixel data
                raise PictureInvalid(_damaged(image.format, data, "pixels", exc)) from None
            out = _rgb8(image)
    if out.shape != (height, width, 3):
        raise PictureInvalid(f"the picture decodes to {out.shape}, not {height}×{width}×3")
    return np.ascontiguousarray(out)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def sniff(data: bytes) -> str | None:
    """The format ``data``'s signature names (one of :data:`FORMATS`), else ``None``."""
    if data.startswith(_PNG_SIGNATURE):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if len(data) >= 2 and data[:1] == b"P" and data[1:2] in (b"1", b"2", b"3", b"4", b"5", b"6"):
        return "PPM"
    return None


def check_png_chunks(data: bytes) -> None:
    """Every chunk of the PNG whole and its CRC checked, up to ``IEND``; else
    :class:`PictureInvalid` naming the chunk, where it is, and what is wrong."""
    at = len(_PNG_SIGNATURE)
    while True:
        if at + 8 > len(data):
            raise PictureInvalid(f"a PNG cut short at byte {len(data):,}: no IEND chunk")
        length = int.from_bytes(data[at : at + 4], "big")
        kind = data[at + 4 : at + 8]
        name = kind.decode("latin-1") if kind.isalpha() else repr(kind)
        end = at + 12 + length
        if length > 0x7FFFFFFF or end > len(data):
            raise PictureInvalid(
                f"a PNG cut short: its {name} chunk at byte {at:,} holds {length:,} bytes, the "
                f"file ends {max(0, len(data) - at - 8):,} bytes into it"
            )
        crc = int.from_bytes(data[end - 4 : end], "big")
        if zlib.crc32(data[at + 4 : end - 4]) != crc:
            raise PictureInvalid(
                f"a damaged PNG: its {name} chunk at byte {at:,} fails its CRC check"
            )
        if kind == b"IEND":
            return
        at = end


def _reason(kind: str, data: bytes) -> BaseException | None:
    """What Pillow's own reader of ``kind`` raises for ``data`` (its words), if anything."""
    from PIL import JpegImagePlugin, PpmImagePlugin

    reader: Any = {"JPEG": JpegImagePlugin.JpegImageFile, "PPM": PpmImagePlugin.PpmImageFile}
    try:
        if kind in reader:
            reader[kind](io.BytesIO(data))
    except (SyntaxError, OSError, ValueError, EOFError) as exc:  # Pillow's words for a bad file
        return exc
    return None


def _damaged(kind: str | None, data: bytes, part: str, exc: BaseException | None) -> str:
    """The message of a picture whose ``part`` (header, pixels) does not read."""
    words = " ".join(str(exc).split())[:200] if exc is not None else ""
    why = f"its {part} do not decode" if part == "pixels" else f"its {part} does not read"
    why += f" ({words})" if words else ""
    what = f"{kind} file" if kind else "picture"
    return f"a truncated or damaged {what} ({len(data):,} bytes): {why}"
