"""The web trees the service serves beside its API: the operator dashboard
(:mod:`~service.web.dashboard`, static files under ``dashboard_files/``) and the browser page
(:mod:`~service.web.page`: static files under ``page_files/`` and the data routes of
:mod:`~service.web.page_data`, with the WebGPU path's plans in :mod:`~service.web.page_wgsl`),
all through :class:`~service.web.static.WebAssets`. Mounted by ``service.http.app``.

Face: ``WebAssets``, imported on first use; the app mounts the two trees through their
modules."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.web.static import WebAssets

__all__ = [
    "WebAssets",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "WebAssets": "static",
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
