"""Scale-out on Ray Serve: the service's one FastAPI app (``service.http.app.create_app``) as a
Ray Serve deployment of N replicas, or autoscaled on ongoing requests (docs/ray.md). Ray is the
``ray`` extra, imported only by :mod:`.deployment` when a replica or a deployment is built.

Face: ``build``, the builder a ``serve run`` config names, imported on first use."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.rayserve.deployment import build

__all__ = [
    "build",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "build": "deployment",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
