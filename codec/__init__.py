"""The data a decode reads (§2, §6.3), one concept per module: envelopes (:mod:`.envelope`,
:mod:`.envelope_read`), payloads and their headers (:mod:`.payload`), the entropy stage
(:mod:`.entropy`, :mod:`.tables`, :mod:`.compressai_rans`), parameter sets and pins
(:mod:`.sets`), the picture (:mod:`.picture`), safe file reads and writes (:mod:`.files`), the
data directory's layout (:mod:`.layout`) and the typed errors (:mod:`.errors`).

Face: an envelope read from its bytes, ``parse(data) -> Envelope`` (JSON or CBOR), its errors
(``EnvelopeError``, every codec error a ``CodecError``) and the picture's ``to_png``; the rest is
used through its modules. Imports ``dispatch`` and nothing above it."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.codec.envelope import Envelope, EnvelopeError
    from wai_dispatch.codec.envelope_read import parse
    from wai_dispatch.codec.errors import CodecError
    from wai_dispatch.codec.picture import to_png

__all__ = [
    "CodecError",
    "Envelope",
    "EnvelopeError",
    "parse",
    "to_png",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "CodecError": "errors",
    "Envelope": "envelope",
    "EnvelopeError": "envelope",
    "parse": "envelope_read",
    "to_png": "picture",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
