"""The decode as one call, for callers written before :class:`service.decoding.decoder.Decoder`:
:func:`decode_envelope` decodes through a Decoder built from the arguments. New code keeps one
Decoder (it keeps opened sets and their tables between decodes); the result types, ``NoPath``
and the picture helpers are re-exported from where they live now."""

from __future__ import annotations

from collections.abc import Mapping

from wai_dispatch.codec.envelope import Envelope
from wai_dispatch.codec.errors import Limits
from wai_dispatch.codec.picture import rgb_digest, to_png, to_rgb8
from wai_dispatch.codec.sets import SetStore
from wai_dispatch.dispatch import REGISTRY, Adapter, Offer, Path, Registry
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import DecodeResult, NoPath, PartResult

__all__ = [
    "DecodeResult",
    "NoPath",
    "PartResult",
    "decode_envelope",
    "rgb_digest",
    "to_png",
    "to_rgb8",
]


def decode_envelope(
    envelope: Envelope,
    *,
    store: SetStore,
    offer: Offer,
    adapters: Mapping[Path, Adapter],
    limits: Limits | None = None,
    registry: Registry = REGISTRY,
) -> DecodeResult:
    """:meth:`Decoder.decode` with a decoder of these parts (nothing kept between calls)."""
    return Decoder(store, offer, adapters, limits=limits, registry=registry).decode(envelope)
