"""The service's use cases, below HTTP: what a request asks of the decoding library and the
report store, as one typed operation each (``decode.py``: an envelope's bytes in, a typed
outcome out, its reports recorded). The HTTP routes, the CLI and the Ray replicas call them;
they import no web framework.

Face: ``decode_here`` (the CLI's decode, in this thread), its ``DecodeRequest`` (from a body:
``local_request``), and the ``Outcome``: ``Decoded`` or ``NoPathFound``. The
service's (admitted, in the decode pool) is ``decode.decode``: a face name never shadows a
module."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.usecase.decode import (
        Decoded,
        DecodeRequest,
        NoPathFound,
        Outcome,
        decode_here,
        local_request,
    )

__all__ = [
    "DecodeRequest",
    "Decoded",
    "NoPathFound",
    "Outcome",
    "decode_here",
    "local_request",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "DecodeRequest": "decode",
    "Decoded": "decode",
    "NoPathFound": "decode",
    "Outcome": "decode",
    "decode_here": "decode",
    "local_request": "decode",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
