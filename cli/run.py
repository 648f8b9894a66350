"""Running a parsed command: its settings read once, then the command, every typed error one
line on stderr with its exit status (:mod:`cli.flags`), never a traceback; and the version.
``cli/main.py`` imports this module once the command line has parsed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from importlib import metadata

from wai_dispatch.cli.flags import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from wai_dispatch.cli.options import settings
from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError


def version() -> str:
    """The installed distribution's version (a checkout on ``PYTHONPATH`` says so)."""
    try:
        return metadata.version("wai-dispatch")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def execute(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """``run(args)`` after the settings validate; its exit status, or a typed error's."""
    try:
        settings(args)  # read and validated once, before the command says anything
        return run(args)
    except WaiError as exc:
        return report(exc, args)
    except BrokenPipeError:  # `wai-dispatch … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        # The last net: the system refused something no typed error above names (a full
        # disk under the data directory, say). One line, never a traceback.
        where = f": {exc.filename}" if exc.filename else ""
        error = WaiError(f"{exc.strerror or exc}{where}", code=ErrorCode.IO_FAILED)
        return report(error, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def report(exc: WaiError, args: argparse.Namespace) -> int:
    """The typed error on stderr, one line per problem; its exit status: the error class's
    ``exit_status`` where it has one (a remote call's, :mod:`cli.remote`), else usage (2)."""
    status = int(getattr(exc, "exit_status", EXIT_USAGE))
    if getattr(args, "json", False):
        print(json.dumps({"error": exc.to_json()}), file=sys.stderr)
        return status
    # The one-line promise, whatever the text: one line per problem (every bad setting).
    for problem in getattr(exc, "problems", None) or [exc.message]:
        message = " ".join(str(problem).split())
        print(f"wai-dispatch: error: {exc.code}: {message}", file=sys.stderr)
    return status
