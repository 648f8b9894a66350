"""A package's lazy face (PEP 562), shared by every ``__init__`` that has one
(docs/architecture.md, "The packages"): the package's table ``_FACE`` maps each name of its
``__all__`` to the module of the package that defines it (``module`` or ``module:attr`` where
the face names it otherwise), and :func:`lazy_face` turns that table into the module's
``__getattr__`` and ``__dir__``, so that importing the package — as every import of one of its
modules does — loads none of them, and a name is imported on first use.

It sits at the import root, below every layer, and imports only the standard library's
``importlib`` and ``sys`` (both loaded by every interpreter already): the sink client's start
(``wai-dispatch decode --url``) pays nothing for it."""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from collections.abc import Callable


def lazy_face(
    package: str, face: dict[str, str], exported: list[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``) for its table
    ``face``: a name of the face is imported from its module on first use and bound in the
    package, so that the next use finds it there."""

    def __getattr__(name: str) -> object:
        where = face.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = where.partition(":")
        value = getattr(importlib.import_module(f"{package}.{module}"), attr or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exported})

    return __getattr__, __dir__
