"""Scale-out on Ray Serve: the service's one FastAPI app (``service.http.app.create_app``) as a
Ray Serve deployment of N replicas, or autoscaled on ongoing requests (docs/ray.md). Ray is the
``ray`` extra, imported only by :mod:`.deployment` when a replica or a deployment is built.

Face: ``build``, the builder a ``serve run`` config names, imported on first use."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.rayserve.deployment import build

__all__ = [
    "build",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "build": "deployment",
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
