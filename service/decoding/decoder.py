"""The one object that decodes: a :class:`Decoder` assembles a set store, an offer and this
machine's adapters once, and every command (the CLI's and the HTTP service's) goes through it:
:meth:`~Decoder.decode` (an envelope, or a bare payload), :meth:`~Decoder.plan`,
:meth:`~Decoder.probe`, :meth:`~Decoder.verify` (§6.4), :meth:`~Decoder.evidence` (§8) and
:meth:`~Decoder.import_compressai`: each a function over the parts it reads (the opened sets,
the :class:`Machine`), which the decoder calls with its own. It reads no environment.

Opened sets and their parsed entropy tables are kept, keyed by set digest, in an LRU
(:mod:`paths.lru`, at most :data:`MAX_OPEN_SETS`): a decode re-hashes no set file unless one
changed on disk since it was verified (one ``lstat`` per file tells), and always reads the
bytes that were verified, never the disk. The adapters :meth:`Decoder.assemble` builds keep their
programs in one program cache (:attr:`Decoder.programs`) under one byte budget. ``decode`` may
be called from several threads at once. Assembling a decoder changes no process-wide state: its
tile budget and the ONNX path's cache folder go with each of its decodes' jobs.

:meth:`Decoder.prepare` reads an envelope's payload headers and opens its sets once, before
the decode, for whoever must know the cost first (the HTTP service's admission);
``decode(prepared)`` then reads neither again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from wai_dispatch.codec.envelope import Envelope, Part, parse
from wai_dispatch.codec.errors import PayloadError
from wai_dispatch.codec.layout import DEFAULT_PNG_LEVEL, ready_set_store_dir, set_store_dir
from wai_dispatch.codec.payload import EntropyResult, entropy_stage
from wai_dispatch.codec.sets import (
    SetNotInstalled,
    SetStore,
    install_bundled,
)
from wai_dispatch.codec.sets.bundled import BundledResult
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.conformance import sets_dir
from wai_dispatch.dispatch import (
    REGISTRY,
    Adapter,
    DispatchPath,
    Offer,
    Pin,
    Registry,
    choose,
    demand,
    parse_offer,
)
from wai_dispatch.dispatch.errors import UnknownCapability
from wai_dispatch.paths import onnx_cache
from wai_dispatch.paths import registry as path_registry  # a module: tests swap its adapters
from wai_dispatch.paths.job import SetFiles, SynthesisJob
from wai_dispatch.paths.lru import DEFAULT_PROGRAM_BYTES, LRU, Programs
from wai_dispatch.paths.onnx import request_thread_pool
from wai_dispatch.paths.tiling import DEFAULT_TILE_BYTES
from wai_dispatch.paths.waiops.choose import check_engine
from wai_dispatch.service.decoding.compressai import import_compressai
from wai_dispatch.service.decoding.evidence import Evidence, set_evidence
from wai_dispatch.service.decoding.plan import load_set_dir, plan_path
from wai_dispatch.service.decoding.prepare import (
    Machine,
    NoProgram,
    OpenedSet,
    OpenedSets,
    Prepared,
    PreparedPart,
    any_header,
    log_failures,
    prepare_envelope,
)
from wai_dispatch.service.decoding.results import (
    DecodeResult,
    ImportResult,
    PartResult,
    PlanResult,
    Undecodable,
    VerifyResult,
    crop_to_picture,
    no_path,
    to_rgb8,
)
from wai_dispatch.service.decoding.setcache import removed
from wai_dispatch.service.decoding.verify import verify_store
from wai_dispatch.setfacts.limits import Limits

log = logging.getLogger("wai_dispatch.decode")

#: How many opened sets a decoder keeps (each holds its files' bytes: ~10 MB for bmshj2018).
MAX_OPEN_SETS = 8


def decoder_offer(
    offer: Iterable[DispatchPath | str] | None,
    adapters: Mapping[DispatchPath, Adapter] | None = None,
) -> Offer:
    """The offer a decoder runs: ``offer`` (the ``offer`` setting) in order, else
    :func:`paths.registry.default_offer`: the reference offer, with a hardware GPU's
    ``gpu/onnx-runtime/float`` after the neural processor where ``adapters`` (default: the
    process's) find one. ``wai-dispatch config`` prints this, as ``serve`` runs it."""
    return parse_offer(path_registry.default_offer(adapters) if offer is None else offer)


class Decoder:
    """A store, an offer and adapters, assembled once (:meth:`assemble`), for every decode."""

    def __init__(
        self,
        store: SetStore,
        offer: Offer,
        adapters: Mapping[DispatchPath, Adapter],
        *,
        limits: Limits | None = None,
        capabilities: Registry = REGISTRY,
        bundled: BundledResult | None = None,
        sets: LRU[str, OpenedSet] | None = None,
        programs: Programs | None = None,
        png_level: int = DEFAULT_PNG_LEVEL,
        tile_bytes: int = DEFAULT_TILE_BYTES,
        cache_dir: str | os.PathLike[str] | None = None,
        waiops_engine: str = "auto",
    ) -> None:
        self.set_store = store
        self.offer = parse_offer(offer)
        self.adapters = dict(adapters)
        self.limits = limits or Limits()
        #: The capabilities this decoder knows (§3's registry, :data:`dispatch.REGISTRY`).
        self.capabilities = capabilities
        self.bundled = bundled or BundledResult()
        #: Opened sets by digest (each counted as its files' bytes).
        self.sets: LRU[str, OpenedSet] = LRU(max_entries=MAX_OPEN_SETS) if sets is None else sets
        self.opened = OpenedSets(store, self.sets, capabilities)  # service/decoding/prepare.py
        #: The program cache the adapters keep their programs in, when they share one
        #: (:meth:`assemble` builds it); its counters are the service's ``/metrics``.
        self.programs: Programs = LRU(DEFAULT_PROGRAM_BYTES) if programs is None else programs
        #: The zlib level of the decodes' PNG (the ``png_level`` setting).
        self.png_level = png_level
        #: This decoder's tile budget (the ``tile_bytes`` setting) and the folder of the ONNX
        #: path's prepared graphs (``<data_dir>/cache/onnx``): each decode's job carries them,
        #: so assembling a decoder changes no other decoder's (no process-wide state).
        self.tile_bytes = tile_bytes
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        #: The wai-ops engine its decodes ask for (the ``waiops_engine`` setting), theirs alone.
        self.waiops_engine = check_engine(waiops_engine)

    @classmethod
    def assemble(
        cls,
        data_dir: str | os.PathLike[str],
        offer: Iterable[DispatchPath | str] | None = None,
        limits: Limits | None = None,
        *,
        adapters: Mapping[DispatchPath, Adapter] | None = None,
        bundled: bool = True,
        ready: bool = True,
        program_cache_bytes: int | None = None,
        ort_threads: int | None = None,
        png_level: int = DEFAULT_PNG_LEVEL,
        tile_bytes: int = DEFAULT_TILE_BYTES,
        waiops_engine: str = "auto",
    ) -> Decoder:
        """The decoder of this machine: the store under ``data_dir``, with the bundled sets
        installed when ``bundled`` (a damaged one is repaired, or reported in :attr:`bundled`,
        never raised; one the set registry removed is not), ``offer`` (else
        :func:`decoder_offer`'s) and the machine's adapters, ONNX Runtime's pool sized by
        ``ort_threads`` (the process's one pool; ``None``: the CPUs). It reads no environment:
        the edge (the CLI, ``serve``) passes its settings' part (``Settings.decoder_args``).
        ``ready``: the store's folder is created, and a data directory that cannot be is
        ``data_dir_invalid`` now rather than later.

        ``program_cache_bytes``: the adapters are built for this decoder around one program
        cache of that budget (the service's ``program_cache_bytes``); without it, the
        process's adapters (built once) and their one cache of the default budget serve."""
        request_thread_pool(ort_threads)
        store = SetStore(
            ready_set_store_dir(data_dir) if ready or bundled else set_store_dir(data_dir)
        )
        # a bundled set the set registry removed stays removed (service/decoding/setcache.py)
        found = install_bundled(store, sets_dir(), skip=removed(store.root)) if bundled else None
        programs: Programs | None = None
        if adapters is None:
            programs, adapters = path_registry.adapters_for(program_cache_bytes)
        return cls(
            store,
            decoder_offer(offer, adapters),
            adapters,
            limits=limits,
            bundled=found,
            programs=programs,
            png_level=png_level,
            tile_bytes=tile_bytes,
            cache_dir=onnx_cache.cache_dir(data_dir),
            waiops_engine=waiops_engine,
        )

    # -- decoding

    def decode(self, envelope: bytes | Envelope | Prepared) -> DecodeResult:
        """Decode the primary; when no path runs it (or this sink does not know its
        capability), the fallback (§4). Raises :class:`NoPath` with every report when
        neither decodes, and a typed error for bad input. A :class:`Prepared` envelope
        (:meth:`prepare`) is decoded with the headers and sets read then."""
        if isinstance(envelope, Prepared):
            prepared = envelope
            envelope = prepared.envelope
            parts: Sequence[Part | PreparedPart] = prepared.parts
        else:
            if not isinstance(envelope, Envelope):
                envelope = parse(bytes(envelope), limits=self.limits)
            parts = envelope.parts()
        return self._decode_parts(parts, envelope.intent, envelope.dispatch_pins())

    def prepare(self, envelope: Envelope) -> Prepared:
        """Read each part's payload header and open its set, once, before the decode
        (service/decoding/prepare.py): what a decode will cost is known from them (the HTTP
        service's admission), and ``decode(prepared)`` reads neither again."""
        return prepare_envelope(envelope, self.opened, self.limits, self.tile_bytes)

    def decode_payload(
        self, payload: bytes, *, capability: str, set_digest: str | None = None
    ) -> DecodeResult:
        """Decode a bare payload of ``capability`` with the set ``set_digest`` (default: the
        store's default set of the capability), no intent and no pin."""
        part = Part("primary", capability, bytes(payload), set_digest, None)
        return self._decode_parts([part], None, [])

    def _decode_parts(
        self, parts: Sequence[Part | PreparedPart], intent: str | None, pins: list[Pin]
    ) -> DecodeResult:
        reports = []
        done: list[PartResult] = []
        failures: dict[DispatchPath, BaseException] = {}
        missing: list[str] = []
        undecodable: list[Undecodable] = []
        for item in parts:
            part = item.part if isinstance(item, PreparedPart) else item
            capability = self.capabilities.get(part.capability)
            if capability is None:
                # Not a capability this sink knows: it cannot decode it on any path, which is
                # exactly when the fallback is there (SPEC §4).
                err = UnknownCapability(f"this sink does not know capability {part.capability}")
                undecodable.append(Undecodable(part.capability, err.code, err.message))
                continue
            needed = demand(capability, intent=intent, pins=pins)
            try:
                opened, stage = self._entropy_stage(item)
            except SetNotInstalled as exc:
                # No set, so no program for any backend (§4.2): the report says so path by
                # path, and the fallback, if any, is tried.
                decision = choose(capability, needed, self.offer, self._without_program())
                reports.append(decision.report)
                missing.append(exc.message)
                continue
            except PayloadError as exc:
                if part.role == "primary" or not (reports or undecodable):
                    raise
                # The fallback's payload is bad input: its own refusal, beside the primary's
                # no-path report (§4), not an error that hides the primary's.
                undecodable.append(
                    Undecodable(part.capability, exc.code, f"fallback {exc.message}")
                )
                continue
            # The entropy stage runs whatever §4 decides (§3): its symbols are reported even
            # when no path runs the networks.
            job = self.job(opened.files, stage.latent, stage.symbols)
            decision = choose(capability, needed, self.offer, self.adapters, job)
            reports.append(decision.report)
            failures.update(decision.failures)
            log_failures(capability.name, decision.failures)
            done.append(
                PartResult(
                    capability.name, opened.files.digest, stage.symbols_digest, stage.latent_shape
                )
            )
            if decision.report.ran is not None:
                rgb = crop_to_picture(to_rgb8(decision.output), part.payload)
                return DecodeResult(
                    rgb, reports, done[-1], failures, undecodable, png_level=self.png_level
                )
        raise no_path(reports, done, undecodable, missing, failures)

    def job(self, files: SetFiles, latent: np.ndarray, symbols: np.ndarray | None) -> SynthesisJob:
        """The synthesis job of one of this decoder's decodes: its tile budget, the ONNX
        path's cache folder and its wai-ops engine go with it (the decode, the plan and §6.4's
        check use it)."""
        return SynthesisJob(
            files, latent, symbols, self.tile_bytes, self.cache_dir, self.waiops_engine
        )

    # -- sets, kept by digest in ``opened`` (``loaded``, ``install``, ``forget``: prepare.py)

    def _entropy_stage(self, item: Part | PreparedPart) -> tuple[OpenedSet, EntropyResult]:
        """The part's set and its entropy stage (§6.3), whatever §4 decides after."""
        part = item.part if isinstance(item, PreparedPart) else item
        header = item.header if isinstance(item, PreparedPart) else None
        if part.role == "fallback" and not isinstance(item, PreparedPart):
            # a fallback's payload is read before its set, as prepare reads it
            header = any_header(part.payload, limits=self.limits)
        opened = self._prepared_set(item)
        if opened.hyper is not None:  # z, the integer hyper-synthesis, y (§3)
            return opened, opened.hyper.run(
                part.payload, limits=self.limits, engine=self.waiops_engine
            )
        tables = opened.tables or tables_of(opened.files)  # raises why not
        return opened, entropy_stage(part.payload, tables, limits=self.limits, header=header)

    def _prepared_set(self, item: Part | PreparedPart) -> OpenedSet:
        """The part's set: as :meth:`prepare` opened it (its error raised now), else opened."""
        if isinstance(item, PreparedPart):
            if item.error is not None:
                raise item.error
            assert item.opened is not None  # prepare keeps a set or the error opening it
            return item.opened
        return self.opened.for_part(item.set, item.capability, item.pin)

    def _without_program(self) -> dict[DispatchPath, Adapter]:
        return {path: NoProgram(path, self.adapters.get(path)) for path in self.offer}

    # -- what the machine has: its paths, a path's plan (§5), §6.4, §8, the CompressAI import

    def machine(self) -> Machine:
        """What this decoder's plan, §6.4 check and §8 figures run on."""
        return Machine(
            self.capabilities, self.offer, self.adapters, self.limits, self.job, self.waiops_engine
        )

    def probe(
        self, offer: Iterable[DispatchPath | str] | None = None
    ) -> list[path_registry.PathStatus]:
        """Each offered path (default: this decoder's offer), present or absent and why."""
        chosen = self.offer if offer is None else parse_offer(offer)
        return path_registry.probe(chosen, self.adapters)

    def plan(
        self,
        path: DispatchPath | str,
        *,
        set_digest: str | None = None,
        set_dir: str | os.PathLike[str] | None = None,
        capability: str = "wai.neural.bmshj2018",
        latent_shape: tuple[int, ...] | None = None,
    ) -> PlanResult:
        """§3 against the set's capability at its registered tier, then §4's device questions
        and the plan (§5), asked as :func:`dispatch.choose` asks them, without running the
        networks (service/decoding/plan.py). The set: ``set_dir`` (a folder outside the
        store), else ``set_digest``, else the store's default set of ``capability``. Every
        shape is checked against the limits before anything of its size is allocated."""
        chosen = path if isinstance(path, DispatchPath) else DispatchPath.parse(path)
        if set_dir is not None:
            files = load_set_dir(Path(set_dir))
        else:
            files = self.opened.loaded(set_digest or self.set_store.default_for(capability).digest)
        return plan_path(self.machine(), chosen, files, latent_shape)

    def verify(self, on_set: Callable[[int, int, str], None] | None = None) -> VerifyResult:
        """§6.4 agreement on every installed set (damaged or unknown ones reported);
        ``on_set(done, total, name)`` is told before each set."""
        return verify_store(self.opened, self.machine(), on_set)

    def evidence(self, set_dir: str | os.PathLike[str] | None = None) -> Evidence:
        """§8's figures for the set in ``set_dir``, else every installed set, on every path
        present here (service/decoding/evidence.py)."""
        if set_dir is not None:
            sets = [load_set_dir(Path(set_dir))]
        else:
            sets = [self.opened.loaded(e.digest) for e in self.set_store.list()]
        return Evidence([set_evidence(self.machine(), files) for files in sets])

    def import_compressai(
        self, data: bytes, *, set_digest: str | None = None, capability: str | None = None
    ) -> ImportResult:
        """CompressAI's own bitstream file (docs/interop.md) as an envelope for a set whose
        model and quality are the file's (service/decoding/compressai.py)."""
        bundled = {s.digest for s in self.bundled.installed}
        return import_compressai(
            self.opened, bundled, self.limits, data, set_digest=set_digest, capability=capability
        )
