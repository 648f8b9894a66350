"""Preparing a decode: what a decode works on besides the envelope, and what it will cost.

- Each installed set opened once and kept (:class:`OpenedSet`; :class:`OpenedSets` keeps them
  by digest in an LRU: every byte verified, its programs and tables checked, a hyperprior's
  hyper-synthesis bound-checked, reopened when its files change on disk), installing into the
  store (refused for a set whose programs do not load or whose capability the decoder does not
  know: ``unknown_capability``), and the stand-in adapter of a path whose set is not installed
  (:class:`NoProgram`: §4.2 refuses it with ``dispatch_program_absent``).
- An envelope whose headers were read and sets opened before the decode (:class:`Prepared`,
  :func:`prepare_envelope`: the decode reads neither again). Preparing, a set of another
  capability than its part raises ``set_capability_mismatch``; any other error opening a set
  is kept for the decode to raise (or, for a set not installed, to try the fallback), as an
  unprepared decode would; a fallback's bad payload is kept as its own refusal, to come after
  the primary's report (§4).
- What the decode will cost (:func:`estimate`), read from its payload headers before anything
  is allocated: the largest part's latent elements and output pixels, its memory and its time.
  The service's admission (service/http/admission.py) and the CLI's local decode
  (cli/decode.py) apply the same estimate against the same settings
  (``max_latent_elements``, ``memory_budget_bytes``, ``decode_timeout_s``;
  :func:`check_estimate`).

The estimate (measured on this machine with the bmshj2018 synthesis, tools/bench_service.py
and tools/bench_tiles.py): an untiled decode's memory grows linearly with the picture, about
520 bytes per output pixel (256×256: 32 MB, 1024×1024: 548 MB over a warm process), nearly all
of it the synthesis's activations. The CPU paths run the synthesis in tiles whose activations
stay within the ``tile_bytes`` setting (paths/tiling.py), so the estimate is 64 MiB, plus what
the whole picture costs (:data:`PICTURE_BYTES_PER_PIXEL`: the float picture, its RGB8, the
PNG and its answer), plus the activations (the rest of 560 bytes per pixel) up to one tile's
budget: 560 bytes per pixel until the tiles start (about 700×700), 40 after. Time is
about 1.7 µs per pixel on 2 quiet cores.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.envelope import Envelope, Part
from wai_dispatch.codec.errors import CodecError, PayloadError
from wai_dispatch.codec.payload import Header, read_header
from wai_dispatch.codec.sets import (
    InstalledSet,
    LoadedSet,
    SetCapabilityMismatch,
    SetNotInstalled,
    SetStore,
)
from wai_dispatch.codec.sets.loaded import check_pin
from wai_dispatch.codec.tables import EntropyTables, tables_of
from wai_dispatch.dispatch import Adapter, Code, DispatchPath, Offer, Pin, Registry
from wai_dispatch.dispatch.errors import UnknownCapability, WaiError
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import LRU
from wai_dispatch.paths.tiling import DEFAULT_TILE_BYTES
from wai_dispatch.paths.waiops.adapter import load_set_program, program_spec
from wai_dispatch.service.decoding.errors import LatentOverLimit, MemoryOverBudget, TimeOverLimit
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.decoding.results import failure_text
from wai_dispatch.setfacts.limits import Limits


def check_programs(files: SetFiles) -> None:
    """Raise the typed error of the first program of ``files`` that does not load, so that a
    broken one is refused as its set loads instead of a later ``dispatch_backend_failed``. Only
    exact, cheap checks run here: today ``wai-ops/1`` (format, weights, the bound rule); ONNX and
    Core ML programs are read by their runtimes."""
    if program_spec(files) is not None:
        load_set_program(files)


#: A decoder's synthesis job for a set's files, a latent and its symbols (``Decoder.job``: its
#: tile budget, the ONNX path's cache folder and its wai-ops engine go with it).
MakeJob = Callable[[SetFiles, np.ndarray, np.ndarray | None], SynthesisJob]


@dataclass(frozen=True)
class Machine:
    """What a decoder's plan, §6.4 check and §8 figures run on: the capabilities it knows, its
    offer, adapters and limits, and its synthesis jobs (``Decoder.machine``)."""

    capabilities: Registry
    offer: Offer
    adapters: Mapping[DispatchPath, Adapter]
    limits: Limits
    job: MakeJob
    #: The wai-ops engine its decodes ask for (a hyperprior's hyper-synthesis, an integer set).
    engine: str = "auto"


@dataclass(frozen=True)
class OpenedSet:
    """A set verified once and kept: its bytes and its parsed entropy tables (when it names
    them), so later decodes with it hash and parse nothing."""

    files: LoadedSet
    tables: EntropyTables | None
    #: A hyperprior set's entropy stage (service/decoding/hyperprior.py), else ``None``.
    hyper: HyperStage | None = None


@dataclass(frozen=True)
class PreparedPart:
    """One part of an envelope as :meth:`Decoder.prepare` read it: its payload header and its
    set, opened, or the typed error that opening it raised (raised, or the fallback tried on
    ``set_not_installed``, when the part is decoded). ``header`` is ``None`` for a capability
    this sink does not know (nothing of it is read)."""

    part: Part
    header: Header | None
    opened: OpenedSet | None = None
    error: WaiError | None = None


@dataclass(frozen=True)
class Prepared:
    """An envelope whose parts' headers were read and sets opened, once, for
    :meth:`Decoder.decode`; ``tile_bytes`` is the preparing decoder's tile budget (what the
    cost estimate reads)."""

    envelope: Envelope
    parts: Sequence[PreparedPart]
    tile_bytes: int = DEFAULT_TILE_BYTES


@dataclass(frozen=True)
class NoProgram:
    """A path's adapter for a decode whose parameter set is not installed: the unit is as the
    real adapter says, and there is no program for the backend."""

    path: DispatchPath
    inner: Adapter | None

    def unit_present(self) -> bool:
        return self.inner is not None and self.inner.unit_present()

    def absent_reason(self) -> str | None:
        return None if self.inner is None else self.inner.absent_reason()

    def program_present(self, job: object) -> bool:
        return False

    def takes_shape(self, job: object) -> bool:
        raise AssertionError("not asked: program_present is False")

    def plan(self, job: object) -> None:
        raise AssertionError("not asked: program_present is False")

    def run(self, job: object) -> None:
        raise AssertionError("not asked: program_present is False")


def any_header(payload: bytes, *, limits: Limits) -> Header:
    """The payload's header, checked against ``limits``: a ``WAIP`` payload's own, or for a
    hyperprior (``WAIH``) payload, its latent y's (what the cost estimate reads)."""
    if bytes(payload[:4]) == waih.MAGIC:
        return waih.read_header(payload, limits=limits).as_latent_header()
    return read_header(payload, limits=limits)


def check_capability(digest: str, opened: OpenedSet, capability: str) -> None:
    """Refuse a set of another capability than its part's (``set_capability_mismatch``)."""
    if opened.files.capability != capability:
        raise SetCapabilityMismatch(
            f"set {digest[:16]}… is {opened.files.capability}'s, not {capability}'s"
        )


log = logging.getLogger("wai_dispatch.decode")


def log_failures(capability: str, failures: Mapping[DispatchPath, BaseException]) -> None:
    """Every backend failure :func:`dispatch.choose` turned into ``dispatch_backend_failed``,
    logged with its path (a typed error as one line, anything else with its traceback)."""
    for path, exc in failures.items():
        log.warning(
            "%s: path %s refused: %s: %s",
            capability,
            path,
            Code.BACKEND_FAILED,
            failure_text(exc),
            exc_info=None if isinstance(exc, WaiError) else exc,
            extra={"dispatch_path": str(path), "capability": capability},
        )


class OpenedSets:
    """The sets of ``store`` a decoder has opened, kept in ``kept`` (each counted as its files'
    bytes); thread-safe: one thread hashes a set, the others wait for it and reuse it, while
    other sets open beside it (a replica warming its sets opens them at once)."""

    def __init__(self, store: SetStore, kept: LRU[str, OpenedSet], capabilities: Registry) -> None:
        self.store = store
        self.kept = kept
        self.capabilities = capabilities
        self._guard = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}  # one per digest: sets open at once
        #: Called before a set missing from the store is answered not installed: raises when
        #: its absence cannot be confirmed (service/store/setsync.py; none: nothing to ask).
        self.confirm_missing: Callable[[], None] = lambda: None

    def get(self, digest: str, pin: Pin | None) -> OpenedSet:
        """The set ``digest``, from the kept ones, else opened from the store (when absent or
        changed on disk); held to ``pin`` (§2: a pinned decode uses exactly these bytes)."""
        opened = self.kept.get(digest)
        if opened is None or not opened.files.unchanged():
            with self._guard:
                opening = self._opening.setdefault(digest, threading.Lock())
            with opening:
                opened = self.kept.get(digest)
                if opened is None or not opened.files.unchanged():
                    files = self.store.open(digest)  # every byte read once and verified
                    check_programs(files)  # a broken program is refused as the set loads
                    try:  # parsed once here; a decode that needs bad tables says why
                        tables = tables_of(files)
                    except CodecError:
                        tables = None
                    # a hyperprior set's program is bound-checked here, as the set loads
                    opened = OpenedSet(files, tables, HyperStage.of(files))
                    nbytes = sum(len(data) for data in files.files.values())
                    self.kept.put(digest, opened, nbytes)
        check_pin(opened.files.manifest, pin)
        return opened

    def loaded(self, digest: str) -> LoadedSet:
        """The installed set ``digest`` (or a unique prefix), verified once and kept."""
        return self.get(self.store.resolve(digest), None).files

    def for_part(self, given: str | None, capability: str, pin: Pin | None) -> OpenedSet:
        """A part's set: the one it names, else the store's default for its capability; its
        capability checked against the part's."""
        digest = given or self.store.default_for(capability).digest
        opened = self.get(digest, pin)
        check_capability(digest, opened, capability)
        return opened

    def install(self, source: str | os.PathLike[str]) -> InstalledSet:
        """Install a set (folder or archive) into the store, refusing one whose capability
        the decoder does not know or whose programs do not load (e.g. a ``wai-ops/1`` program
        that breaks the bound rule): nothing stays."""
        existed = {entry.digest for entry in self.store.list()}
        entry = self.store.install(source)
        try:
            if entry.capability not in self.capabilities:
                known = ", ".join(sorted(self.capabilities))
                raise UnknownCapability(
                    f"set {entry.name} ({entry.digest[:16]}…) is of capability "
                    f"{entry.capability!r}, which this build does not know (known: {known}); "
                    "no path here could decode it"
                )
            files = self.store.open(entry.digest)
            check_programs(files)
            HyperStage.of(files)  # a hyperprior set's hyper-synthesis: the bound rule too
        except WaiError:
            if entry.digest not in existed:
                self.store.remove(entry.digest)
            raise
        self.forget(entry.digest)
        return entry

    def forget(self, digest: str | None = None) -> None:
        """Drop a kept set (every kept set without ``digest``): the next use re-verifies it."""
        if digest is None:
            self.kept.clear()
        else:
            self.kept.pop(digest)


def prepare_envelope(
    envelope: Envelope, sets: OpenedSets, limits: Limits, tile_bytes: int
) -> Prepared:
    """``envelope``'s parts with their headers and sets (or the error opening each), for a
    decoder of ``sets`` and ``limits`` whose tile budget is ``tile_bytes``."""
    out: list[PreparedPart] = []
    for part in envelope.parts():
        if sets.capabilities.get(part.capability) is None:
            out.append(PreparedPart(part, None))
            continue
        try:
            header = any_header(part.payload, limits=limits)
        except PayloadError as exc:
            if part.role == "primary":
                raise
            out.append(PreparedPart(part, None, None, exc))
            continue
        try:
            digest = part.set or sets.store.default_for(part.capability).digest
            opened = sets.get(digest, None)
        except SetNotInstalled as exc:
            sets.confirm_missing()  # the registry unreachable: a retryable 503, not this 404
            out.append(PreparedPart(part, header, None, exc))
            continue
        except WaiError as exc:
            out.append(PreparedPart(part, header, None, exc))
            continue
        check_capability(digest, opened, part.capability)
        try:
            check_pin(opened.files.manifest, part.pin)
        except WaiError as exc:
            out.append(PreparedPart(part, header, None, exc))
            continue
        out.append(PreparedPart(part, header, opened))
    return Prepared(envelope, tuple(out), tile_bytes)


# --- what a decode will cost, from its headers ------------------------------------------------

BASE_BYTES = 64 * 1024 * 1024
BYTES_PER_PIXEL = 560
#: What the picture itself costs per pixel whatever the tiles: the float32 synthesis output
#: (12 B), its RGB8 (3), the PNG and the answer around it (base64 in JSON), with a margin.
PICTURE_BYTES_PER_PIXEL = 40
SECONDS_PER_PIXEL = 1.7e-6
DEFAULT_UPSAMPLING = 16


@dataclass(frozen=True)
class Estimate:
    """The largest part's latent elements and output pixels, and the decode's cost."""

    latent_elements: int
    pixels: int
    memory_bytes: int
    seconds: float


def estimate(prepared: Prepared, tile_bytes: int | None = None) -> Estimate:
    """The cost of decoding an envelope from its payload headers alone, as
    :meth:`Decoder.prepare` read them (parts decode one at a time, so the dearest part is the
    decode's); a part's set, where it is installed, may state its ``upsampling``.
    ``tile_bytes``: the synthesis's tile budget (default: the preparing decoder's,
    :attr:`Prepared.tile_bytes`, its ``tile_bytes`` setting)."""
    elements = pixels = 0
    for item in prepared.parts:
        header = item.header
        if header is None:
            continue  # not decodable here at all: the decoder says so, or tries the fallback
        factor = DEFAULT_UPSAMPLING
        if item.opened is not None:
            up = (item.opened.files.facts.model_extra or {}).get("upsampling")
            if isinstance(up, int) and 1 <= up <= 64:
                factor = up
        elements = max(elements, header.symbols)
        pixels = max(pixels, header.height * factor * header.width * factor)
    return estimate_of(elements, pixels, prepared.tile_bytes if tile_bytes is None else tile_bytes)


def estimate_of(
    latent_elements: int, pixels: int, tile_bytes: int = DEFAULT_TILE_BYTES
) -> Estimate:
    """The estimate of a decode of ``latent_elements`` to ``pixels`` output pixels, its
    synthesis in tiles of ``tile_bytes`` (default: :data:`paths.tiling.DEFAULT_TILE_BYTES`)."""
    activations = min((BYTES_PER_PIXEL - PICTURE_BYTES_PER_PIXEL) * pixels, tile_bytes)
    return Estimate(
        latent_elements,
        pixels,
        BASE_BYTES + activations + PICTURE_BYTES_PER_PIXEL * pixels,
        SECONDS_PER_PIXEL * pixels,
    )


def check_estimate(
    est: Estimate,
    *,
    max_latent_elements: int,
    memory_budget_bytes: int,
    decode_timeout_s: float,
    lifted_by: str = "",
) -> None:
    """Refuse a decode over a limit, naming the limit (and ``lifted_by``, what lifts it, where
    something does): ``latent_over_limit``, ``decode_memory_over_budget`` or
    ``decode_time_over_limit``."""
    lift = f"; {lifted_by} lifts it" if lifted_by else ""
    if est.latent_elements > max_latent_elements:
        raise LatentOverLimit(
            f"the latent has {est.latent_elements} elements, over the limit "
            f"max_latent_elements={max_latent_elements}{lift}",
        )
    if est.memory_bytes > memory_budget_bytes:
        raise MemoryOverBudget(
            f"a {est.pixels}-pixel decode needs about {est.memory_bytes >> 20} MiB, over the "
            f"limit memory_budget_bytes={memory_budget_bytes} "
            f"({memory_budget_bytes >> 20} MiB){lift}",
        )
    if est.seconds > decode_timeout_s:
        raise TimeOverLimit(
            f"a {est.pixels}-pixel decode takes about {est.seconds:.1f} s, over the limit "
            f"decode_timeout_s={decode_timeout_s:g}{lift}",
        )
