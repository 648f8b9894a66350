"""The decoding library every caller shares — the CLI, the tools and the HTTP service:
:class:`.decoder.Decoder` (opens the set store once, decodes, plans, verifies, imports), its
results (:mod:`.results`), the placement plan (:mod:`.plan`), §6.4 agreement (:mod:`.verify`),
the CompressAI import (:mod:`.compressai`). It reads no environment: its callers pass what a
decoder takes (service/settings.py reads the settings, at the edge).

Face: ``Decoder``, its results (``DecodeResult``, ``PlanResult``, ``VerifyResult``; ``NoPath``
when no path decodes). Each is imported on first use, so that the sink's client
(``decode --url``) loads none. It imports no web framework
and no database (tests/project/test_architecture.py)."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.decoding.results import DecodeResult, NoPath, PlanResult, VerifyResult

__all__ = [
    "DecodeResult",
    "Decoder",
    "NoPath",
    "PlanResult",
    "VerifyResult",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "DecodeResult": "results",
    "Decoder": "decoder",
    "NoPath": "results",
    "PlanResult": "results",
    "VerifyResult": "results",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
