"""What a decode works on besides the envelope: a set opened once and kept
(:class:`OpenedSet`), an envelope whose headers were read and sets opened before the decode
(:class:`Prepared`, for admission), and the stand-in adapter of a path whose set is not
installed (:class:`NoProgram`: §4.2 refuses it with ``dispatch_program_absent``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.envelope import Envelope, Part
from wai_dispatch.codec.payload import Header, read_header
from wai_dispatch.codec.sets import LoadedSet, SetCapabilityMismatch
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.dispatch import Adapter, Code, DispatchPath
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.paths.tiling import DEFAULT_TILE_BYTES
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.service.decoding.results import failure_text
from wai_dispatch.setfacts.limits import Limits

__all__ = ["NoProgram", "OpenedSet", "Prepared", "PreparedPart"]


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
    if waih.is_hyperprior(payload):
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
            "%s: path %s refused: %s: %s", capability, path, Code.BACKEND_FAILED,
            failure_text(exc), exc_info=None if isinstance(exc, WaiError) else exc,
            extra={"dispatch_path": str(path), "capability": capability},
        )  # fmt: skip
