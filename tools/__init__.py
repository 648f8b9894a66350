"""Tools: set writers, training of the demo weights, CompressAI import, benchmarks, the page's
browser check. Each is a script (``python -m wai_dispatch.tools.NAME``); most need the tools
extra (``make tools``). Beside the CLI in the layers: no tool imports an HTTP module.

Face: ``encode`` (a picture to an envelope, what ``wai-dispatch encode`` runs; the tools extra)
and ``run_docs`` (the doc runner), imported on first use."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.tools.doc_runner import run_docs
    from wai_dispatch.tools.encoder import encode

__all__ = [
    "encode",
    "run_docs",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "encode": "encoder",
    "run_docs": "doc_runner",
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
