"""The browser page's site: its static files (``service/web/page_files/``, package data) and
the few things a decode in the page reads from the service: the bundled sample envelopes, a
capability's default set, a set's manifest and files (each verified by the set store), the
native reference decode of a sample that the page's verifier compares with (§6.4), the WebGPU
path's kernel plans (:mod:`service.web.page_wgsl`) and the integer conformance corpus.

One resolver, :class:`PageSite`, answers a path below the page's root with a status, a body and
a media type; the HTTP service mounts it (and the browser tests serve it from a loopback
server), so both serve exactly the same bytes. docs/page.md describes the routes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.codes import ErrorCode, status_of
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.paths.lru import LRU
from wai_dispatch.service.decoding.decoder import Decoder

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_MEDIA = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".md": "text/plain; charset=utf-8",
    ".wgsl": "text/plain; charset=utf-8",
    "": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class PageResponse:
    status: int
    body: bytes
    media_type: str


def page_dir() -> Path:
    """Where the page's static files live (``wai_dispatch/service/web/page_files``)."""
    return Path(str(resources.files("wai_dispatch.service.web").joinpath("page_files")))


def samples_dir() -> Path:
    """The bundled sample envelopes (``conformance/envelopes``)."""
    from wai_dispatch.conformance import envelopes_dir

    return envelopes_dir()


def corpus_dir() -> Path | None:
    """The integer capability's conformance corpus (``conformance/neural-conformance``), where
    this build has it."""
    try:
        from wai_dispatch.conformance import neural_conformance_dir
    except ImportError:
        return None
    return neural_conformance_dir()


def _error(code: str, message: str) -> PageResponse:
    """An error answer: the code's status from the registry (``ErrorCode.status``)."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return PageResponse(status_of(code), body, "application/json")


def _json(value: object) -> PageResponse:
    return PageResponse(200, json.dumps(value, separators=(",", ":")).encode(), "application/json")


class PageSite:
    """Answers ``GET <page root>/<rel>`` (docs/page.md) for the sink whose :class:`Decoder`
    it is given: its store holds the sets the page reads, and its adapters make the native
    reference decode."""

    def __init__(
        self,
        decoder: Decoder,
        *,
        root: Path | None = None,
        samples: Path | None = None,
        corpus: Path | None = None,
        sets: LRU[str, LoadedSet] | None = None,
    ):
        self.decoder = decoder
        self.store = decoder.store
        self._reference: Decoder | None = None
        self.root = (root or page_dir()).resolve()
        self.samples = samples or samples_dir()
        self.corpus = corpus or corpus_dir()
        from wai_dispatch.service.web.page_wgsl import WgslPrograms

        self._wgsl_programs = WgslPrograms()
        #: The sets the page read, verified by the store (default: the last two kept).
        self.sets: LRU[str, LoadedSet] = LRU(max_entries=2) if sets is None else sets
        self._references: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, rel: str) -> PageResponse:
        path, _, query = rel.partition("?")
        parts = [unquote(p) for p in path.split("/")]
        if parts and parts[0] == "":
            parts = parts[1:]
        try:
            return self._route(parts, parse_qs(query))
        except WaiError as exc:
            return _error(exc.code, exc.message)

    def _route(self, parts: list[str], query: dict[str, list[str]]) -> PageResponse:
        if parts in ([], [""]):
            return self._static(["index.html"])
        if len(parts) == 2 and parts[0] == "reference":
            return _json(self.reference(parts[1]))
        if parts == ["samples.json"]:
            return _json(self.sample_names())
        if len(parts) == 2 and parts[0] == "samples":
            if parts[1] not in self.sample_names():
                return _error(ErrorCode.PAGE_NOT_FOUND, f"no bundled sample {parts[1]!r}")
            return PageResponse(200, (self.samples / parts[1]).read_bytes(), "application/json")
        if len(parts) == 3 and parts[:2] == ["sets", "default"]:
            return _json({"digest": self.store.default_for(parts[2]).digest})
        if parts and parts[0] in ("corpus.json", "corpus") and self.corpus is None:
            return _error(ErrorCode.PAGE_NOT_FOUND, "this build has no integer conformance corpus")
        if parts == ["corpus.json"] and self.corpus is not None:
            return PageResponse(200, (self.corpus / "corpus.json").read_bytes(), "application/json")
        if len(parts) == 2 and parts[0] == "corpus":
            return self._corpus_payload(parts[1])
        if len(parts) >= 3 and parts[0] == "sets" and _DIGEST.fullmatch(parts[1]):
            if parts[2] == "wgsl":
                return self._wgsl(parts[1], parts[3:], query)
            return self._set_file(parts[1], parts[2:])
        return self._static(parts)

    def sample_names(self) -> list[str]:
        """The bundled envelopes in their JSON form (the page reads JSON)."""
        return sorted(p.name for p in self.samples.glob("*.json"))

    def reference(self, sample: str) -> dict[str, Any]:
        """The native sink's decode of a bundled sample on the CPU through ONNX Runtime (§6.4's
        reference): its symbols digest, and its RGB8 picture (base64, H×W×3) where a path ran.
        The page's verifier holds its own decode to it."""
        if sample not in self.sample_names():
            raise WaiError(f"no bundled sample {sample!r}", code=ErrorCode.PAGE_NOT_FOUND)
        with self._lock:
            cached = self._references.get(sample)
        if cached is not None:
            return cached
        from wai_dispatch.codec.picture import rgb_digest
        from wai_dispatch.dispatch.paths import CPU_ONNX_RUNTIME
        from wai_dispatch.service.decoding.results import NoPath

        if self._reference is None:  # the same store and adapters, ONNX Runtime on the CPU only
            d = self.decoder
            self._reference = Decoder(d.store, (CPU_ONNX_RUNTIME,), d.adapters, limits=d.limits)
        try:
            result = self._reference.decode((self.samples / sample).read_bytes())
        except NoPath as exc:
            out: dict[str, Any] = {
                "sample": sample,
                "symbols_digest": exc.parts[-1].symbols_digest if exc.parts else None,
                "reports": [r.to_json() for r in exc.reports],
                "picture": None,
            }
        else:
            height, width = result.rgb.shape[:2]
            rgb = result.rgb.tobytes()
            out = {
                "sample": sample,
                "symbols_digest": result.part.symbols_digest,
                "reports": [r.to_json() for r in result.reports],
                "picture": {
                    "width": width,
                    "height": height,
                    "blake3": rgb_digest(result.rgb),
                    "rgb": base64.b64encode(rgb).decode("ascii"),
                },
            }
        with self._lock:
            self._references[sample] = out
        return out

    def _static(self, parts: list[str]) -> PageResponse:
        if not all(_SEGMENT.fullmatch(p) for p in parts):
            return _error(ErrorCode.PAGE_NOT_FOUND, "no such page file")
        path = self.root.joinpath(*parts)
        if not path.is_file():
            return _error(ErrorCode.PAGE_NOT_FOUND, f"no page file {'/'.join(parts)!r}")
        return PageResponse(200, path.read_bytes(), _MEDIA.get(path.suffix, _MEDIA[""]))

    def _corpus_payload(self, name: str) -> PageResponse:
        """A payload of the integer capability's conformance corpus (the verify view)."""
        if self.corpus is None:
            return _error(ErrorCode.PAGE_NOT_FOUND, "this build has no integer conformance corpus")
        corpus = strictjson.loads((self.corpus / "corpus.json").read_bytes())
        names = {p["payload"] for p in corpus["payloads"]}
        if name not in names:
            return _error(ErrorCode.PAGE_NOT_FOUND, f"no corpus payload {name!r}")
        return PageResponse(200, (self.corpus / name).read_bytes(), "application/octet-stream")

    def _wgsl(self, digest: str, parts: list[str], query: dict[str, list[str]]) -> PageResponse:
        """The WebGPU path's kernels and constants for the page (service/web/page_wgsl.py)."""
        from wai_dispatch.service.web.page_wgsl import read_limits, read_shape

        program = self._wgsl_programs.get(self._open(digest))
        if parts == ["constants.bin"]:
            return PageResponse(200, program.blob, "application/octet-stream")
        if parts == ["plan"]:
            shape = read_shape(query.get("shape", [""])[-1])
            limits = read_limits(query.get("limits", [""])[-1])
            return _json(program.plan(shape, limits))
        return _error(ErrorCode.PAGE_NOT_FOUND, "no such wgsl route")

    def _set_file(self, digest: str, parts: list[str]) -> PageResponse:
        loaded = self._open(digest)
        if parts == ["manifest.json"]:
            return PageResponse(200, loaded.manifest.canonical(), "application/json")
        if len(parts) == 2 and parts[0] == "files":
            data = loaded.read(parts[1])
            suffix = Path(parts[1]).suffix
            media = "application/json" if suffix == ".json" else "application/octet-stream"
            return PageResponse(200, data, media)
        return _error(ErrorCode.PAGE_NOT_FOUND, "no such set route")

    def _open(self, digest: str) -> LoadedSet:
        """The set, read once and verified by the store, and kept in :attr:`sets`."""
        loaded = self.sets.get(digest)
        if loaded is None:
            loaded = self.store.open(digest)
            self.sets.put(digest, loaded, sum(len(data) for data in loaded.files.values()))
        return loaded


@contextlib.contextmanager
def serve_loopback(site: PageSite, port: int = 0) -> Iterator[str]:
    """The page's site on 127.0.0.1 (standard library only: the verifier and the browser
    tests use it where the HTTP service is not running); yields the page's URL (``…/page/``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            prefix = "/page/"
            if not self.path.startswith(prefix):
                self.send_error(404)
                return
            try:
                res = site.get(self.path[len(prefix) :])
            except Exception as exc:  # a bug is a 500 with its message, never a dropped socket
                why = f"the page's site failed: {type(exc).__name__}: {exc}"
                res = _error(ErrorCode.INTERNAL_ERROR, why)
            self.send_response(res.status)
            self.send_header("Content-Type", res.media_type)
            self.send_header("Content-Length", str(len(res.body)))
            self.end_headers()
            self.wfile.write(res.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
