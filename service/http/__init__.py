"""The HTTP service on FastAPI: the application and its lifespan (:mod:`.app`, the composition
root that also mounts ``service.web``), the dependencies routes declare (:mod:`.deps`), one
routes module per resource (:mod:`.routes`), admission (:mod:`.admission`), auth
(:mod:`.auth`), errors (:mod:`.errors`), metrics (:mod:`.metrics`), logs (:mod:`.logs`) and the
OpenAPI document (:mod:`.openapi`).

Face: ``ServiceError``, imported on first use; the
application is the composition root's, above this layer (``service.http.app.create_app``):
uvicorn runs it from the import string ``wai_dispatch.service.http.app:create_app``, and no CLI
command or tool imports it."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.http.errors import ServiceError

__all__ = [
    "ServiceError",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "ServiceError": "errors",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
