"""One decode, end to end: envelope → §2 demand → entropy stage (§6.3) → §4 choose over the
offer → RGB8. The CLI and the HTTP service both decode through :func:`decode_envelope`."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from wai_dispatch.codec import payload as payload_codec
from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.errors import CodecError, Limits
from wai_dispatch.codec.sets import LoadedSet, SetNotInstalled, SetStore
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.dispatch import (
    REGISTRY,
    Adapter,
    Offer,
    Path,
    Registry,
    Report,
    WaiError,
    choose,
    demand,
)
from wai_dispatch.paths.job import SynthesisJob


class NoPath(WaiError):
    """Every offered path was refused for every decode the envelope allows (§4)."""

    code = "decode_no_path"

    def __init__(self, message: str, reports: list[Report], parts: list[PartResult]) -> None:
        super().__init__(message)
        self.reports = reports
        self.parts = parts


@dataclass(frozen=True)
class PartResult:
    """The entropy stage's result for one decode part, kept whether or not a path ran."""

    capability: str
    set_digest: str
    symbols_digest: str
    latent_shape: tuple[int, ...]


@dataclass(frozen=True)
class DecodeResult:
    """The picture (RGB8, H×W×3), the report of every decode tried (primary first) and the
    entropy-stage facts of the decode that produced the picture."""

    rgb: np.ndarray
    reports: list[Report]
    part: PartResult
    failures: Mapping[Path, BaseException] = field(default_factory=dict)

    def png(self) -> bytes:
        return to_png(self.rgb)


def to_rgb8(x_hat: np.ndarray) -> np.ndarray:
    """The synthesis output (1×3×H×W float) as RGB8 (H×W×3): clamp to [0, 1], multiply by 255
    in float32, round half to even, cast (docs/decoding.md)."""
    x = np.asarray(x_hat, dtype=np.float32)
    if x.ndim != 4 or x.shape[0] != 1 or x.shape[1] != 3:
        raise ValueError(f"synthesis output has shape {x.shape}, not 1×3×H×W")
    scaled = np.clip(x[0], np.float32(0.0), np.float32(1.0)) * np.float32(255.0)
    return np.ascontiguousarray(np.rint(scaled).astype(np.uint8).transpose(1, 2, 0))


def to_png(rgb: np.ndarray) -> bytes:
    from PIL import Image  # lazy: only a decode that writes a picture needs Pillow

    buf = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def entropy_stage(
    set_files: LoadedSet, payload: bytes, *, limits: Limits
) -> tuple[np.ndarray, str, np.ndarray]:
    """§6.3 on the CPU, integer and table reads only: symbols, their digest, the latent."""
    facts = set_files.facts
    tables_name = facts.get("tables")
    if not isinstance(tables_name, str) or not set_files.has(tables_name):
        raise CodecError(
            f"set {set_files.digest[:16]}… names no entropy tables file", code="set_no_tables"
        )
    tables = _tables(set_files.digest, tables_name, set_files.read(tables_name))
    symbols = payload_codec.decode(payload, tables, limits=limits)
    return symbols, payload_codec.symbols_digest(symbols), payload_codec.latent(symbols, tables)


_TABLES: OrderedDict[tuple[str, str], EntropyTables] = OrderedDict()
_TABLES_LOCK = threading.Lock()


def _tables(digest: str, name: str, data: bytes) -> EntropyTables:
    """Parsed tables and their constriction models, kept per set digest: a set is content-
    addressed, so its tables never change, and parsing 192 channels costs ~15 ms."""
    key = (digest, name)
    with _TABLES_LOCK:
        if key in _TABLES:
            _TABLES.move_to_end(key)
            return _TABLES[key]
    tables = EntropyTables.from_json(data)
    with _TABLES_LOCK:
        _TABLES[key] = tables
        while len(_TABLES) > 16:
            _TABLES.popitem(last=False)
    return tables


def decode_envelope(
    envelope: Envelope,
    *,
    store: SetStore,
    offer: Offer,
    adapters: Mapping[Path, Adapter],
    limits: Limits | None = None,
    registry: Registry = REGISTRY,
) -> DecodeResult:
    """Decode the primary; when no path runs it, the fallback (§4). Raises :class:`NoPath`
    with every report when neither decodes, and a typed error for bad input."""
    limits = limits or Limits()
    pins = envelope.dispatch_pins()
    reports: list[Report] = []
    parts: list[PartResult] = []
    failures: dict[Path, BaseException] = {}
    missing: list[str] = []
    for part in envelope.parts():
        capability = registry[part.capability]
        needed = demand(capability, intent=envelope.intent, pins=pins)
        try:
            digest = part.set or store.default_for(capability.name).digest
            set_files = store.open(digest, pin=part.pin)
        except SetNotInstalled as exc:
            # No set, so no program for any backend (§4.2): the report says so path by path,
            # and the fallback, if any, is tried.
            decision = choose(capability, needed, offer, _without_program(offer, adapters))
            reports.append(decision.report)
            missing.append(exc.message)
            continue
        _, digest_hex, latent = entropy_stage(set_files, part.payload, limits=limits)
        # The entropy stage runs whatever §4 decides (§3): its symbols are reported even
        # when no path runs the networks.
        decision = choose(capability, needed, offer, adapters, SynthesisJob(set_files, latent))
        reports.append(decision.report)
        failures.update(decision.failures)
        parts.append(PartResult(capability.name, set_files.digest, digest_hex, latent.shape))
        if decision.report.ran is not None:
            return DecodeResult(to_rgb8(decision.output), reports, parts[-1], failures)
    tried = ", ".join(r.capability for r in reports)
    why = "".join(f"; {m}" for m in missing)
    raise NoPath(f"no offered path decodes this envelope ({tried}){why}", reports, parts)


@dataclass(frozen=True)
class _NoProgram:
    """A path's adapter for a decode whose parameter set is not installed: the unit is as the
    real adapter says, and there is no program for the backend."""

    path: Path
    inner: Adapter | None

    def unit_present(self) -> bool:
        return self.inner is not None and self.inner.unit_present()

    def program_present(self, job: object) -> bool:
        return False

    def takes_shape(self, job: object) -> bool:
        raise AssertionError("not asked: program_present is False")

    def plan(self, job: object) -> None:
        raise AssertionError("not asked: program_present is False")

    def run(self, job: object) -> None:
        raise AssertionError("not asked: program_present is False")


def _without_program(offer: Offer, adapters: Mapping[Path, Adapter]) -> dict[Path, Adapter]:
    return {path: _NoProgram(path, adapters.get(path)) for path in offer}
