"""Tools: set writers, training of the demo weights, CompressAI import, benchmarks, the page's
browser check. Each is a script (``python -m wai_dispatch.tools.NAME``); most need the tools
extra (``make tools``). Beside the CLI in the layers: no tool imports an HTTP module.

Face: ``encode`` (a picture to an envelope, what ``wai-dispatch encode`` runs; the tools extra)
and ``run_docs`` (the doc runner), imported on first use."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.tools.doc_runner import run_docs
    from wai_dispatch.tools.encoder import encode

__all__ = [
    "encode",
    "run_docs",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "encode": "encoder",
    "run_docs": "doc_runner",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
