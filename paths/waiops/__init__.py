"""The ``wai-ops/1`` integer operator set (docs/wai-ops.md): its program format
(:mod:`.program`), loading and bound-checking a program (:mod:`.load`, :mod:`.bounds`), the
int64 reference interpreter (:mod:`.reference`), the fast exact engines (:mod:`.engine`,
:mod:`.onnx_engine`) and the ``cpu/wai-ops/integer`` adapter (:mod:`.adapter`).

Face: ``Program``, ``parse_program``, ``load_program``, ``WaiOpsError`` and the path's
``WaiOpsAdapter``; the engines are used through their modules."""

from __future__ import annotations

import importlib

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

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "Program": "program",
    "WaiOpsAdapter": "adapter",
    "WaiOpsError": "errors",
    "load_program": "load",
    "parse_program": "program",
}


def __getattr__(name: str) -> object:
    """A name of the face, imported from its module on first use."""
    where = _FACE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = where.partition(":")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
