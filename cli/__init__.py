"""The ``wai-dispatch`` command line (docs/cli.md): :mod:`.main` parses and runs a command,
loading only that command's parser (``cli/parsers/``, each with ``add(sub)``) and, once the
line has parsed, the module that runs it; one module per group of commands (``decode``,
``remote``, ``verify``, ``paths``, ``sets``, ``serve``, ``tools``, ``explain``, ``policy``,
``config``, ``doctor``, ``completion``).

Face: ``run_command(argv) -> exit status`` (``main.main``: a face name never shadows a module),
``build_parser`` and the table of ``COMMANDS``, imported on first use. It imports no HTTP
module: ``serve`` hands uvicorn the service's import string."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.cli.main import COMMANDS, build_parser
    from wai_dispatch.cli.main import main as run_command

__all__ = [
    "COMMANDS",
    "build_parser",
    "run_command",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "COMMANDS": "main",
    "build_parser": "main",
    "run_command": "main:main",
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
