"""The ``gpu/wgsl/integer`` path: the ``wai-ops/1`` integer operator set as WebGPU compute
kernels (WGSL, ``i32``/``u32`` only) run through wgpu-py, bit for bit the interpreter's result.

Each kernel is described by a JSON descriptor (``descriptors/``, validated against
``descriptor.schema.json``) and rendered from a Jinja2 template (``templates/``). Importing this
package imports neither wgpu nor the templates: :mod:`.runner` loads wgpu on first use.

Face: the path's ``WgslAdapter``, the ``Runner`` of one device and ``UnitAbsent`` (no adapter
to run on)."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.paths.wgsl.adapter import WgslAdapter
    from wai_dispatch.paths.wgsl.runner import Runner, UnitAbsent

__all__ = [
    "Runner",
    "UnitAbsent",
    "WgslAdapter",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "Runner": "runner",
    "UnitAbsent": "runner",
    "WgslAdapter": "adapter",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
