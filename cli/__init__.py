"""The ``wai-dispatch`` command line (docs/cli.md): :mod:`.main` parses and runs a command,
loading only that command's parser (``cli/parsers/``, each with ``add(sub)``) and, once the
line has parsed, the module that runs it; one module per group of commands (``decode``,
``remote``, ``verify``, ``paths``, ``sets``, ``serve``, ``tools``, ``explain``, ``policy``,
``config``, ``doctor``, ``completion``).

Face: ``run_command(argv) -> exit status`` (``main.main``: a face name never shadows a module),
``build_parser`` and the table of ``COMMANDS``, imported on first use. It imports no HTTP
module: ``serve`` hands uvicorn the service's import string."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.cli.main import COMMANDS, build_parser
    from wai_dispatch.cli.main import main as run_command

__all__ = [
    "COMMANDS",
    "build_parser",
    "run_command",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "COMMANDS": "main",
    "build_parser": "main",
    "run_command": "main:main",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
