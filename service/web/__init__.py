"""The web trees the service serves beside its API: the operator dashboard
(:mod:`~service.web.dashboard`, static files under ``dashboard_files/``) and the browser page
(:mod:`~service.web.page`: static files under ``page_files/`` and the data routes of
:mod:`~service.web.page_data`, with the WebGPU path's plans in :mod:`~service.web.page_wgsl`),
all through :class:`~service.web.static.WebAssets`. Mounted by ``service.http.app``.

Face: ``WebAssets``, imported on first use; the app mounts the two trees through their
modules."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.web.static import WebAssets

__all__ = [
    "WebAssets",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "WebAssets": "static",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
