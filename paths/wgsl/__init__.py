"""The ``gpu/wgsl/integer`` path: the ``wai-ops/1`` integer operator set as WebGPU compute
kernels (WGSL, ``i32``/``u32`` only) run through wgpu-py, bit for bit the interpreter's result.

Each kernel is described by a JSON descriptor (``descriptors/``, validated against
``descriptor.schema.json``) and rendered from a Jinja2 template (``templates/``). Importing this
package imports neither wgpu nor the templates: :mod:`.runner` loads wgpu on first use.

Face: the path's ``WgslAdapter``, the ``Runner`` of one device and ``UnitAbsent`` (no adapter
to run on)."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.paths.wgsl.adapter import WgslAdapter
    from wai_dispatch.paths.wgsl.runner import Runner, UnitAbsent

__all__ = [
    "Runner",
    "UnitAbsent",
    "WgslAdapter",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "Runner": "runner",
    "UnitAbsent": "runner",
    "WgslAdapter": "adapter",
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
