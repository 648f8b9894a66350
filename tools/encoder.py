"""``wai-dispatch encode``: a picture to a ``wai-envelope/1`` for an installed set
(docs/encode.md). The set decides the capability, the tables and the limits; the analysis comes
from the checkpoint the set was written from, checked against the BLAKE3 its usage statement
records. What differs by capability is one :class:`Encoder` in :data:`ENCODERS`: its payload
function (imported only when it runs: it needs torch) and the multiple the picture is padded to.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import blake3
import numpy as np
import numpy.typing as npt

from wai_dispatch.cli.errors import ToolsMissing
from wai_dispatch.codec import payload as payload_codec
from wai_dispatch.codec.envelope import Envelope, EnvelopePin
from wai_dispatch.codec.files import read_regular
from wai_dispatch.codec.picture_read import PictureOverLimits, read_picture
from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.codec.sets.errors import SetCapabilityMismatch
from wai_dispatch.conformance import weights_dir
from wai_dispatch.dispatch import Arithmetic, Intent
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.decoding.prepare import check_estimate, estimate_of
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools.errors import CheckpointMismatch, CheckpointRequired, EncodeUnsupported

if TYPE_CHECKING:
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.settings import Settings

#: The largest checkpoint read (bmshj2018 at quality 8 is ~30 MB; a hyperprior's more).
CHECKPOINT_LIMIT = 1 << 30
DEFAULT_CAPABILITY = "wai.neural.bmshj2018"
DEFAULT_UPSAMPLING = 16
TOOLS_HINT = (
    "encode needs the tools extra (torch and CompressAI): `make tools`, or "
    "pip install 'wai-dispatch[tools]' and then pip install --no-deps compressai==1.2.8"
)


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint the analysis is read from: its bytes, its BLAKE3 and how it was checked
    (``verified``: equal to the set's record; else why it could not be)."""

    path: Path
    data: bytes = field(repr=False)
    blake3: str
    verified: bool
    note: str


@dataclass(frozen=True)
class EncodeJob:
    """What a capability's encode function is given: the picture (RGB8, H×W×3, already padded
    to the encoder's multiple), the set (its verified files) and the checkpoint."""

    picture: npt.NDArray[np.uint8]
    files: LoadedSet
    checkpoint: Checkpoint
    limits: Limits
    #: The input's (width, height) when padding changed it: the payload then carries it
    #: (version 2, docs/payload.md) and the decode is cropped to it; ``None``: not padded.
    picture_size: tuple[int, int] | None = None
    #: Told ``(stages done, stages in all, what runs)`` as the analysis goes, where the
    #: capability's encoder reports progress (the hyperprior's, stage by stage and strip by
    #: strip); ``None``: no report.
    progress: Progress | None = field(default=None, compare=False)


#: A progress report: ``(stages done, stages in all, what runs)``.
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Coded:
    """A capability's encode: the payload, and the symbols the decoder's entropy stage reads
    from it (their digest is the one a decode reports)."""

    payload: bytes
    symbols: npt.NDArray[np.int32]
    #: The symbols digest a decode reports, where it covers more than ``symbols`` (a
    #: hyperprior's: z's symbols, then y's); ``None``: the digest of ``symbols``.
    digest: str | None = None


class EncodeFn(Protocol):
    def __call__(self, job: EncodeJob) -> Coded: ...


@dataclass(frozen=True)
class Encoder:
    """A capability's encoder: ``target``, its encode function as ``module:function`` of
    ``wai_dispatch.tools`` (imported when it runs), and the multiple the picture is padded to
    (the analysis's total stride: 16 for bmshj2018, 64 for a hyperprior)."""

    target: str
    multiple: int

    def load(self) -> EncodeFn:
        """The encode function; a module that needs what is not installed (torch at its top)
        is ``tools_missing``."""
        module, function = self.target.split(":")
        try:
            loaded = importlib.import_module(f"wai_dispatch.tools.{module}")
        except ImportError as exc:
            raise ToolsMissing(f"{TOOLS_HINT} ({exc})") from None
        found: EncodeFn = getattr(loaded, function)
        return found


#: capability → its encoder. The bmshj2018 float set and the integer set derived from it code
#: the same symbols against the same tables; they differ only in the decoder's synthesis.
ENCODERS: dict[str, Encoder] = {
    "wai.neural.bmshj2018": Encoder("encode_factorized:encode", 16),
    "wai.neural.int_synth": Encoder("encode_factorized:encode", 16),
    "wai.neural.bmshj2018_hyperprior": Encoder("hyperprior_encode:encode", 64),
}


@dataclass(frozen=True)
class EncodeResult:
    envelope: Envelope
    set_digest: str
    set_name: str
    capability: str
    picture_size: tuple[int, int]  # width, height of the input
    coded_size: tuple[int, int]  # width, height after padding: the synthesis's output
    latent_shape: tuple[int, ...]
    symbols_digest: str
    payload_bytes: int
    checkpoint: Checkpoint
    symbols: npt.NDArray[np.int32] = field(repr=False)
    #: What the user should know about the envelope (a replicate intent no path can keep).
    notes: tuple[str, ...] = ()

    @property
    def bpp(self) -> float:
        """Payload bits per pixel of the input picture."""
        width, height = self.picture_size
        return 8 * self.payload_bytes / (width * height)

    def summary(self) -> dict[str, Any]:
        return {
            "set": self.set_digest,
            "set_name": self.set_name,
            "capability": self.capability,
            "intent": self.envelope.intent,
            "picture": {"width": self.picture_size[0], "height": self.picture_size[1]},
            "coded": {"width": self.coded_size[0], "height": self.coded_size[1]},
            "latent_shape": list(self.latent_shape),
            "symbols_digest": self.symbols_digest,
            "payload_bytes": self.payload_bytes,
            "bpp": round(self.bpp, 4),
            "notes": list(self.notes),
            "checkpoint": {
                "path": str(self.checkpoint.path),
                "blake3": self.checkpoint.blake3,
                "verified": self.checkpoint.verified,
                "note": self.checkpoint.note,
            },
        }


def encode(
    decoder: Decoder,
    picture: bytes,
    *,
    set_digest: str | None,
    capability: str | None = None,
    checkpoint: Path | None = None,
    intent: str | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> EncodeResult:
    """``picture`` (PNG, JPEG or PPM bytes) coded for the set ``set_digest`` (default: the
    store's default set of ``capability``). Held to the decoder's limits, and with
    ``settings`` to the decode limits a local decode and the service apply (what
    ``--no-limits`` lifts), from the picture's header before its pixels are decoded.
    ``progress``: told how the analysis goes (:attr:`EncodeJob.progress`)."""
    store = decoder.set_store
    if set_digest is None:
        set_digest = store.default_for(capability or DEFAULT_CAPABILITY).digest
    files = decoder.opened.loaded(set_digest)
    if capability is not None and capability != files.capability:
        raise SetCapabilityMismatch(
            f"set {files.name} ({files.digest[:16]}…) is of {files.capability}, not {capability}",
        )
    encoder = ENCODERS.get(files.capability)
    if encoder is None:
        known = ", ".join(sorted(ENCODERS))
        raise EncodeUnsupported(
            f"no encoder for {files.capability} (set {files.name}); this build encodes {known}",
        )
    chosen = resolve_checkpoint(files, checkpoint)
    check = _size_check(files, encoder.multiple, decoder.limits, settings)
    rgb = read_picture(picture, check)
    height, width = rgb.shape[:2]
    padded = pad(rgb, encoder.multiple)
    size = None if padded.shape == rgb.shape else (width, height)
    coded = encoder.load()(EncodeJob(padded, files, chosen, decoder.limits, size, progress))
    envelope = Envelope(
        capability=files.capability,
        payload=coded.payload,
        intent=intent,
        pins=(EnvelopePin(capability=files.capability, set=files.digest),),
    )
    return EncodeResult(
        envelope,
        files.digest,
        files.name,
        files.capability,
        (width, height),
        (int(padded.shape[1]), int(padded.shape[0])),
        tuple(int(d) for d in coded.symbols.shape),
        coded.digest or payload_codec.symbols_digest(coded.symbols),
        len(coded.payload),
        chosen,
        coded.symbols,
        _notes(decoder, files.capability, intent),
    )


def _notes(decoder: Decoder, capability: str, intent: str | None) -> tuple[str, ...]:
    registered = decoder.capabilities.get(capability)
    if intent == Intent.REPLICATE and registered and registered.networks is Arithmetic.FLOAT:
        return (
            f"{capability}'s networks are float: no path decodes a replicate envelope of it "
            "(§3); encode for an integer set (wai.neural.int_synth) to replicate",
        )
    return ()


def pad(rgb: npt.NDArray[np.uint8], multiple: int) -> npt.NDArray[np.uint8]:
    """``rgb`` (H×W×3) padded on the bottom and right to multiples of ``multiple`` by
    repeating its last row and column (what the demo weights' measurements do)."""
    height, width = rgb.shape[:2]
    extra_h, extra_w = -height % multiple, -width % multiple
    if not extra_h and not extra_w:
        return rgb
    return np.pad(rgb, ((0, extra_h), (0, extra_w), (0, 0)), mode="edge")


# -- limits ---------------------------------------------------------------------------------


def _size_check(
    files: LoadedSet, multiple: int, limits: Limits, settings: Settings | None
) -> Callable[[int, int], None]:
    """The check of a picture's size, from its header: the padded picture's latent within the
    decoder's :class:`Limits`, and (with ``settings``) the decode's estimate within the
    service's limits. The refusal names the limit."""
    up = _upsampling(files)
    channels = files.facts.latent_channels or 0

    def check(width: int, height: int) -> None:
        if width < 1 or height < 1:
            raise PictureOverLimits(f"the picture is {width}×{height}: empty")
        coded_w, coded_h = width + (-width % multiple), height + (-height % multiple)
        lat_h, lat_w = coded_h // up, coded_w // up
        said = (
            f"the picture is {width}×{height} (coded {coded_w}×{coded_h}, latent {lat_h}×{lat_w})"
        )
        if lat_w > limits.max_latent_width or lat_h > limits.max_latent_height:
            raise PictureOverLimits(
                f"{said}: over the limit max_latent_height×max_latent_width = "
                f"{limits.max_latent_height}×{limits.max_latent_width} "
                f"({limits.max_latent_width * up}×{limits.max_latent_height * up} pixels)"
            )
        if channels and channels * lat_h * lat_w > limits.max_symbols:
            raise PictureOverLimits(
                f"{said}: {channels * lat_h * lat_w} symbols, over the limit "
                f"max_symbols={limits.max_symbols}"
            )
        if settings is None:
            return
        try:
            check_estimate(
                estimate_of(channels * lat_h * lat_w, coded_w * coded_h),
                max_latent_elements=settings.max_latent_elements,
                memory_budget_bytes=settings.memory_budget_bytes,
                decode_timeout_s=settings.decode_timeout_s,
                lifted_by="--no-limits",
            )
        except WaiError as exc:
            raise PictureOverLimits(f"{said}: its decode would be refused: {exc.message}") from None

    return check


def _upsampling(files: LoadedSet) -> int:
    up = (files.facts.model_extra or {}).get("upsampling")
    return up if isinstance(up, int) and 1 <= up <= 64 else DEFAULT_UPSAMPLING


# -- the checkpoint -------------------------------------------------------------------------


def recorded_checkpoint(files: LoadedSet) -> tuple[str | None, str | None]:
    """The checkpoint the set's usage statement records: its file name and BLAKE3 (either may
    be ``None``: a set written from CompressAI's zoo records its source, not a digest)."""
    try:
        usage = json.loads(files.read(files.manifest.usage))
    except (ValueError, WaiError):
        return None, None
    weights = usage.get("weights") if isinstance(usage, dict) else None
    if not isinstance(weights, dict):
        return None, None
    name, digest = weights.get("checkpoint"), weights.get("blake3")
    return (
        name if isinstance(name, str) else None,
        digest if isinstance(digest, str) else None,
    )


def resolve_checkpoint(files: LoadedSet, given: Path | None) -> Checkpoint:
    """The checkpoint to analyse with: ``given`` (refused when its BLAKE3 is not the one the
    set records), else the bundled demo weights when they are the ones the set records."""
    name, recorded = recorded_checkpoint(files)
    what = f"set {files.name} ({files.digest[:16]}…)"
    if given is not None:
        data = read_regular(given, limit=CHECKPOINT_LIMIT, what="checkpoint")
        digest = blake3.blake3(data).hexdigest()
        if recorded is None:
            note = f"not verified: {what} records no checkpoint digest"
            return Checkpoint(given, data, digest, False, note)
        if digest != recorded:
            raise CheckpointMismatch(
                f"checkpoint {given} has blake3 {digest[:16]}…; {what} was written from "
                f"{name or 'a checkpoint'} with blake3 {recorded[:16]}…: the analysis must be "
                "the one its synthesis was trained with (write a set from this checkpoint with "
                "`wai-dispatch make-set KIND --checkpoint FILE`)",
            )
        return Checkpoint(given, data, digest, True, f"blake3 equals {what}'s record")
    demo = _bundled_checkpoint(name, recorded)
    if demo is not None:
        return demo
    raise CheckpointRequired(
        f"{what} records checkpoint {name or '(unnamed)'}"
        + (f" with blake3 {recorded[:16]}…" if recorded else "")
        + ", which is not bundled here: give it with --checkpoint FILE",
    )


def _bundled_checkpoint(name: str | None, recorded: str | None) -> Checkpoint | None:
    """The bundled weights of a checkout (conformance/weights/) whose BLAKE3 is the recorded
    one: found by their ``.blake3`` file (a set written from a copy of the demo weights under
    another name records that name), else by the recorded name; read and hashed before use."""
    if recorded is None:
        return None
    try:
        folder = weights_dir()
    except FileNotFoundError:  # a wheel: the weights ship with a checkout only
        return None
    candidates = [
        side.with_suffix("")
        for side in sorted(folder.glob("*.blake3"))
        if side.read_text(encoding="utf-8", errors="replace").strip() == recorded
    ]
    if name is not None and Path(name).name == name:
        candidates.append(folder / name)
    for path in candidates:
        if not path.is_file():
            continue
        data = read_regular(path, limit=CHECKPOINT_LIMIT, what="checkpoint")
        digest = blake3.blake3(data).hexdigest()
        if digest == recorded:
            note = "the bundled demo weights, the checkpoint the set records"
            return Checkpoint(path, data, digest, True, note)
    return None
