"""The ``wai-ops/1`` integer operator set (docs/wai-ops.md): its program format
(:mod:`.program`), loading and bound-checking a program (:mod:`.load`, :mod:`.bounds`), the
int64 reference interpreter (:mod:`.reference`), the fast exact engines (:mod:`.engine`,
:mod:`.onnx_engine`) and the ``cpu/wai-ops/integer`` adapter (:mod:`.adapter`).

Face: ``Program``, ``parse_program``, ``load_program``, ``WaiOpsError`` and the path's
``WaiOpsAdapter``; the engines are used through their modules."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter
    from wai_dispatch.paths.waiops.errors import WaiOpsError
    from wai_dispatch.paths.waiops.load import load_program
    from wai_dispatch.paths.waiops.program import Program, parse_program

__all__ = [
    "Program",
    "WaiOpsAdapter",
    "WaiOpsError",
    "load_program",
    "parse_program",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "Program": "program",
    "WaiOpsAdapter": "adapter",
    "WaiOpsError": "errors",
    "load_program": "load",
    "parse_program": "program",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
