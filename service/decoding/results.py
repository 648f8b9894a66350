"""What the :class:`~service.decoding.decoder.Decoder` returns: typed results for a decode,
a plan, the §6.4 check and a CompressAI import, and :class:`NoPath`, the decode no path ran;
and the decoded picture: the synthesis output as RGB8 (docs/decoding.md, :func:`to_rgb8`), its
BLAKE3 digest (:func:`rgb_digest`) and its PNG (:func:`to_png`).

A decode's picture is of its own size (docs/payload.md, version 2): a payload that carries the
coded picture's width and height is decoded to that size, the synthesis's output cropped to its
top-left region after the synthesis ran (whole or in tiles, :func:`crop_to_picture`); a
version-1 payload is decoded to the synthesis's whole output."""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import blake3
import numpy as np

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec import payload as waip
from wai_dispatch.codec import picture_size
from wai_dispatch.codec.errors import PayloadFormatError
from wai_dispatch.codec.layout import DEFAULT_PNG_LEVEL
from wai_dispatch.codec.sets.errors import SetNotInstalled
from wai_dispatch.dispatch import Code, DispatchPath, Placement, Report, WaiError
from wai_dispatch.dispatch.errors import InvalidInput, UnknownCapability


@dataclass(frozen=True)
class PartResult:
    """The entropy stage's result for one decode part, kept whether or not a path ran."""

    capability: str
    set_digest: str
    symbols_digest: str
    latent_shape: tuple[int, ...]


@dataclass(frozen=True)
class Undecodable:
    """An envelope part this sink cannot decode at all (a capability its registry does not
    hold): no path is asked, and the next part (the fallback) is tried (§4, SPEC §4)."""

    capability: str
    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"capability": self.capability, "code": self.code, "message": self.message}


def failure_text(exc: BaseException) -> str:
    """A backend's failure in one line, as the no-path answer and the log name it: a typed
    error's code and message, else the exception's type and text (at most 300 characters)."""
    if isinstance(exc, WaiError):
        text = f"{exc.code}: {exc.message}"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"


class NoPath(InvalidInput):
    """every offered path refused every decode the envelope allows (§4); the reports say why"""

    code = "decode_no_path"

    def __init__(
        self,
        message: str,
        reports: list[Report],
        parts: list[PartResult],
        undecodable: list[Undecodable] | None = None,
    ) -> None:
        super().__init__(message)
        self.reports = reports
        self.parts = parts
        self.undecodable = list(undecodable or [])


class SetMissing(SetNotInstalled, NoPath):
    """No path ran only because every part's set is not installed here (``set_not_installed``,
    naming the digest): the reports say so path by path all the same."""


def no_path(
    reports: list[Report],
    done: list[PartResult],
    undecodable: list[Undecodable],
    missing: list[str],
    failures: Mapping[DispatchPath, BaseException],
) -> WaiError:
    """The error of a decode no path ran: ``unknown_capability`` when no part was of a
    capability this sink knows; :class:`SetMissing` when only sets were missing; else
    :class:`NoPath`, its message naming what stood in the way (a path refused because its
    program is bad input, a wai-ops program that breaks the bound rule say, names the error:
    the report's code alone would hide it)."""
    if not reports and undecodable:
        return UnknownCapability(undecodable[0].message)
    if missing and len(missing) == len(reports) and not undecodable:
        # Nothing else stood in the way: say so, not "no path" with its refusals.
        return SetMissing("; ".join(missing), reports, done, undecodable)
    tried = ", ".join([r.capability for r in reports] + [u.capability for u in undecodable])
    # each backend that failed says why (a named error, or any exception's type and text)
    bad = [f"{p}: {Code.BACKEND_FAILED}: {failure_text(e)}" for p, e in failures.items()]
    why = "".join(f"; {m}" for m in missing + [u.message for u in undecodable] + bad)
    return NoPath(
        f"no offered path decodes this envelope ({tried}){why}", reports, done, undecodable
    )


@dataclass(frozen=True)
class DecodeResult:
    """The picture (RGB8, H×W×3) and its digest, the report of every decode tried (primary
    first), the entropy-stage facts of the decode that produced the picture, and the parts
    this sink could not decode at all."""

    rgb: np.ndarray
    reports: list[Report]
    part: PartResult
    failures: Mapping[DispatchPath, BaseException] = field(default_factory=dict)
    undecodable: list[Undecodable] = field(default_factory=list)
    #: The zlib level :meth:`png` uses (the decoder's ``png_level`` setting).
    png_level: int = DEFAULT_PNG_LEVEL

    @property
    def rgb_digest(self) -> str:
        """BLAKE3 (hex) of the RGB8 samples (:func:`rgb_digest`)."""
        return rgb_digest(self.rgb)

    @property
    def capability(self) -> str:
        return self.part.capability

    @property
    def set_digest(self) -> str:
        return self.part.set_digest

    @property
    def symbols_digest(self) -> str:
        return self.part.symbols_digest

    @property
    def latent_shape(self) -> tuple[int, ...]:
        return self.part.latent_shape

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])

    def png(self, level: int | None = None) -> bytes:
        """The picture as PNG at zlib ``level`` (default :attr:`png_level`)."""
        return to_png(self.rgb, self.png_level if level is None else level)


@dataclass(frozen=True)
class PlanResult:
    """What a plan found for one path and set, without decoding: the placement (§5), or the
    refusal code with a reason for a person."""

    set_digest: str
    capability: str
    path: DispatchPath
    latent_shape: tuple[int, ...]
    placement: Placement | None = None
    code: Code | None = None
    reason: str | None = None
    #: The nodes of the graph the backend runs, by unit, where it says (ONNX Runtime): shown
    #: beside the placement, never in a report (§5 counts the program's operations).
    runtime_nodes: Placement | None = None

    @property
    def ok(self) -> bool:
        return self.code is None

    def to_json(self) -> dict[str, Any]:
        out = {
            "set": self.set_digest,
            "capability": self.capability,
            "path": self.path.to_json(),
            "latent_shape": list(self.latent_shape),
            "placement": None if self.placement is None else self.placement.to_json(),
            "refused": None
            if self.code is None
            else {"reason": str(self.code), "message": self.reason},
        }
        if self.runtime_nodes is not None:
            out["runtime_nodes"] = self.runtime_nodes.to_json()
        return out


@dataclass(frozen=True)
class ImportResult:
    """A CompressAI bitstream turned into an envelope for a set (docs/interop.md)."""

    envelope: Any  # codec.envelope.Envelope
    set_digest: str
    set_name: str
    capability: str
    latent_shape: tuple[int, ...]
    symbols_digest: str
    payload_bytes: int
    chosen: str = "named with --set"  # why this set: named, or the one that fits the file


@dataclass(frozen=True)
class SetCheck:
    """§6.4 on one set: its checks (each a JSON-able row), or why it was skipped or damaged."""

    digest: str
    name: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    skipped: str | None = None
    damaged: list[dict[str, str]] | None = None

    @property
    def ok(self) -> bool:
        return self.damaged is None and all(c["ok"] is not False for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"set": self.digest, "name": self.name, "checks": self.checks}
        if self.skipped is not None:
            out["skipped"] = self.skipped
        if self.damaged is not None:
            out["damaged"] = self.damaged
        return out


@dataclass(frozen=True)
class VerifyResult:
    """§6.4 on every installed set: ok when no check failed, no set is damaged, and at least
    one check ran."""

    sets: list[SetCheck]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.sets) and any(s.checks for s in self.sets)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "sets": [s.to_json() for s in self.sets]}


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


# --- the decoded picture: RGB8, its digest, its PNG -------------------------------------------

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
