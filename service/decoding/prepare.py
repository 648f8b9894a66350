"""Preparing an envelope for its decode: each part's payload header read (checked against the
limits; a bad one raises its typed error here) and its set opened, once, so that what a decode
will cost is known before it runs (the HTTP service's admission) and the decode reads neither
again.

A set that is of another capability than its part raises ``set_capability_mismatch`` here; any
other error opening a set is kept for the decode to raise (or, for a set not installed, to try
the fallback), as an unprepared decode would. A fallback's bad payload is kept as its own
refusal, to come after the primary's report (§4)."""

from __future__ import annotations

from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.errors import PayloadError
from wai_dispatch.codec.sets import SetNotInstalled
from wai_dispatch.codec.sets.loaded import check_pin
from wai_dispatch.dispatch import Registry
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.service.decoding.opened_sets import OpenedSets
from wai_dispatch.service.decoding.parts import (
    Prepared,
    PreparedPart,
    any_header,
    check_capability,
)
from wai_dispatch.setfacts.limits import Limits

__all__ = ["prepare_envelope"]


def prepare_envelope(
    envelope: Envelope, registry: Registry, limits: Limits, sets: OpenedSets, tile_bytes: int
) -> Prepared:
    """``envelope``'s parts with their headers and sets (or the error opening each), for a
    decoder of ``registry``, ``limits`` and ``sets`` whose tile budget is ``tile_bytes``."""
    out: list[PreparedPart] = []
    for part in envelope.parts():
        if registry.get(part.capability) is None:
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
