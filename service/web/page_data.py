"""What a decode in the browser page reads from the service besides its static files (the
routes of :mod:`service.web.page`, listed in docs/page.md); every refusal is a typed
:class:`WaiError`."""

from __future__ import annotations

import asyncio
import base64
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wai_dispatch.codec.envelope import parse
from wai_dispatch.codec.errors import check_latent_shape
from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.conformance import envelopes_dir, neural_conformance_dir
from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.dispatch.offer import CPU_ONNX_RUNTIME
from wai_dispatch.paths.lru import LRU
from wai_dispatch.paths.waiops.adapter import load_set_program
from wai_dispatch.paths.waiops.onnx_engine import build_model
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.prepare import (
    DEFAULT_UPSAMPLING,
    Estimate,
    Prepared,
    estimate_of,
)
from wai_dispatch.service.decoding.results import NoPath, rgb_digest
from wai_dispatch.service.web.errors import PageNotFound
from wai_dispatch.service.web.page_wgsl import WgslPrograms

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def _missing(message: str) -> WaiError:
    return PageNotFound(message)


class PageData:
    """The page's data over the sink's :class:`Decoder`: its store holds the sets the page
    reads, and its adapters make the native reference decode."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.set_store = decoder.set_store
        self.samples = envelopes_dir()
        self.corpus = neural_conformance_dir()
        self.wgsl_programs = WgslPrograms()
        #: cpu/wai-ops/integer's graphs by set digest (:meth:`waiops_graph`), the last two kept.
        self.waiops_graphs: LRU[str, bytes] = LRU(max_entries=2)
        #: The sets the page read, verified by the store: the last two kept.
        self.sets: LRU[str, LoadedSet] = LRU(max_entries=2)
        # ONNX Runtime on the CPU only, over the same store and adapters (§6.4's reference)
        self._reference = Decoder(
            decoder.set_store, (CPU_ONNX_RUNTIME,), decoder.adapters, limits=decoder.limits
        )
        self._references: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        #: The reference decode being made per sample (service/web/page.py): concurrent first
        #: requests wait for that one rather than each decoding.
        self.computing: dict[str, asyncio.Future[dict[str, Any]]] = {}

    # -- samples and the corpus

    def sample_names(self) -> list[str]:
        """The bundled envelopes in their JSON form (the page reads JSON)."""
        return sorted(p.name for p in self.samples.glob("*.json"))

    def sample(self, name: str) -> bytes:
        if name not in self.sample_names():
            raise _missing(f"no bundled sample {name[:80]!r}")
        return (self.samples / name).read_bytes()

    def corpus_json(self) -> bytes:
        if not (self.corpus / "corpus.json").is_file():
            raise _missing("this build has no integer conformance corpus")
        return (self.corpus / "corpus.json").read_bytes()

    def corpus_payload(self, name: str) -> bytes:
        """A payload of the integer capability's conformance corpus (the verify view)."""
        corpus = strictjson.loads(self.corpus_json())
        if name not in {p["payload"] for p in corpus["payloads"]}:
            raise _missing(f"no corpus payload {name[:80]!r}")
        return (self.corpus / name).read_bytes()

    # -- sets

    def default_set(self, capability: str) -> str:
        return self.set_store.default_for(capability).digest

    def open(self, digest: str) -> LoadedSet:
        """The set, read once and verified by the store, and kept in :attr:`sets`."""
        loaded = self.sets.get(digest)
        if loaded is None:
            loaded = self.set_store.open(digest)
            self.sets.put(digest, loaded, sum(len(data) for data in loaded.files.values()))
        return loaded

    def manifest(self, digest: str) -> bytes:
        return self.open(digest).manifest.canonical()

    def set_file(self, digest: str, name: str) -> bytes:
        if not _NAME.fullmatch(name):
            raise _missing("no such set file")
        return self.open(digest).read(name)

    def wgsl_constants(self, digest: str) -> bytes:
        return self.wgsl_programs.get(self.open(digest)).blob

    def plan_estimate(self, shape: Sequence[int]) -> Estimate:
        """A plan's cost for admission: a decode's of that latent (an upper bound on planning
        it), the shape first held to the codec's limits like a payload header's."""
        check_latent_shape(tuple(shape), self.decoder.limits, what="the plan's latent")
        _, channels, height, width = shape
        pixels = height * DEFAULT_UPSAMPLING * width * DEFAULT_UPSAMPLING
        return estimate_of(channels * height * width, pixels)

    def wgsl_plan(
        self, digest: str, shape: Sequence[int], limits: Mapping[str, int]
    ) -> dict[str, Any]:
        """The WebGPU path's plan for a latent ``shape`` under the browser's ``limits``
        (service/web/page_wgsl.py: ``read_shape``, ``read_limits``)."""
        program = self.wgsl_programs.get(self.open(digest))
        return program.plan(shape, limits)

    def waiops_graph(self, digest: str) -> bytes:
        """The page's ``cpu/wai-ops/integer`` graph: the set's ``wai-ops/1`` program as the
        native ``float32`` engine runs it (:func:`paths.waiops.onnx_engine.build_model`, the
        same bytes), for ONNX Runtime Web's WebAssembly build. A program whose bounds reach
        2^24 has none (float32 would not compute it exactly): ``page_not_found``."""
        graph = self.waiops_graphs.get(digest)
        if graph is None:
            program = load_set_program(self.open(digest))
            if not program.float32_exact:
                raise _missing(
                    f"set {digest[:16]}…'s wai-ops program reaches {program.largest} (≥ 2^24): "
                    "it has no float32-exact graph"
                )
            graph = build_model(program)
            self.waiops_graphs.put(digest, graph, len(graph))
        return graph

    # -- §6.4's reference

    def cached_reference(self, sample: str) -> dict[str, Any] | None:
        """The reference decode of ``sample`` if it was made already."""
        with self._lock:
            return self._references.get(sample)

    def prepare_reference(self, sample: str) -> Prepared:
        """The sample read and prepared (headers, set) for :meth:`reference`: what its decode
        will cost is known from it (:func:`service.decoding.prepare.estimate`)."""
        return self._reference.prepare(parse(self.sample(sample), limits=self.decoder.limits))

    def reference(self, sample: str, prepared: Prepared | None = None) -> dict[str, Any]:
        """The native sink's decode of a bundled sample on the CPU through ONNX Runtime (§6.4's
        reference): its symbols digest, and its RGB8 picture (base64, H×W×3) where a path ran.
        The page's verifier holds its own decode to it. Made once per sample and kept."""
        cached = self.cached_reference(sample)
        if cached is not None:
            return cached
        if prepared is None:
            prepared = self.prepare_reference(sample)
        try:
            result = self._reference.decode(prepared)
        except NoPath as exc:
            out: dict[str, Any] = {
                "sample": sample,
                "symbols_digest": exc.parts[-1].symbols_digest if exc.parts else None,
                "reports": [r.to_json() for r in exc.reports],
                "picture": None,
            }
        else:
            height, width = result.rgb.shape[:2]
            out = {
                "sample": sample,
                "symbols_digest": result.part.symbols_digest,
                "reports": [r.to_json() for r in result.reports],
                "picture": {
                    "width": width,
                    "height": height,
                    "blake3": rgb_digest(result.rgb),
                    "rgb": base64.b64encode(result.rgb.tobytes()).decode("ascii"),
                },
            }
        with self._lock:
            self._references[sample] = out
        return out


def media_type(name: str) -> str:
    """A set file's media type as the page reads it."""
    return "application/json" if Path(name).suffix == ".json" else "application/octet-stream"
