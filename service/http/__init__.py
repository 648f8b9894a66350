"""The HTTP service on FastAPI: the application and its lifespan (:mod:`.app`, the composition
root that also mounts ``service.web``), the dependencies routes declare (:mod:`.deps`), one
routes module per resource (:mod:`.routes`), admission (:mod:`.admission`), auth
(:mod:`.auth`), errors (:mod:`.errors`), metrics (:mod:`.metrics`), logs (:mod:`.logs`) and the
OpenAPI document (:mod:`.openapi`).

Face: ``ServiceError`` and the ``HttpCode`` of its own refusals, imported on first use; the
application is the composition root's, above this layer (``service.http.app.create_app``):
uvicorn runs it from the import string ``wai_dispatch.service.http.app:create_app``, and no CLI
command or tool imports it."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.http.codes import HttpCode
    from wai_dispatch.service.http.errors import ServiceError

__all__ = [
    "HttpCode",
    "ServiceError",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "HttpCode": "codes",
    "ServiceError": "errors",
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
