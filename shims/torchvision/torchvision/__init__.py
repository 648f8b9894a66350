"""NOT torchvision: wai-dispatch's shim (``shims/torchvision/`` in its repository).

CompressAI 1.2.8 imports ``torchvision.transforms`` when it starts (to list torchvision's
transforms in its registry), and no torchvision that installs here imports beside the CPU torch
2.13.0 the tools extra pins: PyPI's torchvision 0.28.0 links torch's CUDA libraries. This
package gives CompressAI that one module, with no transform in it. Every other name, attribute
or submodule of ``torchvision`` raises an ``ImportError`` that names this shim. To use
torchvision itself, install a build for this torch (``pip install torchvision==0.28.0
--index-url https://download.pytorch.org/whl/cpu``): it has the same distribution name, so pip
replaces the shim.
"""

import sys
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from typing import NoReturn

__version__ = "0+wai.shim"


def refuse(name: str) -> NoReturn:
    """Raise the ``ImportError`` for ``name``, a part of torchvision this shim does not have."""
    raise ImportError(
        f"{name}: this torchvision is wai-dispatch's shim ({__file__}), not torchvision; it has "
        "only an empty torchvision.transforms, for CompressAI's start-up. Install torchvision "
        "built for this torch to use it.",
        name=name,
    )


def module_getattr(module: str) -> Callable[[str], NoReturn]:
    """A module ``__getattr__``: dunder names (probed by ``hasattr``, ``import *``, pickling)
    are absent as usual; every other missing name is :func:`refuse`'d."""

    def __getattr__(name: str) -> NoReturn:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        refuse(f"{module}.{name}")

    return __getattr__


class _Submodules:
    """Last on ``sys.meta_path``: a ``torchvision.*`` module no finder found is refused."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname.startswith("torchvision."):
            refuse(fullname)
        return None


sys.meta_path.append(_Submodules)
__getattr__ = module_getattr(__name__)
