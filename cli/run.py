"""Running a parsed command: its settings read once, then the command, every typed error one
line on stderr with its exit status (:mod:`cli.flags`), never a traceback; and the version.
``cli/main.py`` imports this module once the command line has parsed."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from importlib import metadata

from wai_dispatch.cli.errors import IoFailed, StoreUnavailable
from wai_dispatch.cli.flags import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from wai_dispatch.cli.options import settings
from wai_dispatch.dispatch.errors import Busy, Unavailable, WaiError


def version() -> str:
    """The installed distribution's version (a checkout on ``PYTHONPATH`` says so)."""
    try:
        return metadata.version("wai-dispatch")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _LibraryLines(logging.Handler):
    """The library's log records in a command, as ``wai-dispatch: LEVEL: message`` lines on the
    stderr of the moment; errors only: a condition the library warns of and the command then
    turns into a typed error is said once, by that error (``serve`` replaces this handler with
    the service's JSON lines)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)

    def emit(self, record: logging.LogRecord) -> None:
        message = " ".join(record.getMessage().split())
        print(f"wai-dispatch: {record.levelname.lower()}: {message}", file=sys.stderr)


def execute(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """``run(args)`` after the settings validate; its exit status, or a typed error's."""
    logging.getLogger("wai_dispatch").handlers[:] = [_LibraryLines()]
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
        error = IoFailed(f"{exc.strerror or exc}{where}")
        return report(error, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        typed = store_error(exc)
        if typed is None:
            raise
        return report(typed, args)


def store_error(exc: BaseException) -> WaiError | None:
    """The report store's failure (``StoreDown``, or SQLAlchemy's error from any command that
    opens the store: ``tokens``, ``policy``, ``sets``, ``reports``) as one typed line; ``None``
    for anything else. The classes are looked up among the loaded modules only: a command that
    never opened the store loaded neither, and raised neither."""
    db = sys.modules.get("wai_dispatch.service.store.report_store")
    sa = sys.modules.get("sqlalchemy.exc")
    down = db is not None and isinstance(exc, db.StoreDown)
    if not (down or (sa is not None and isinstance(exc, sa.SQLAlchemyError))):
        return None
    orig = getattr(exc, "orig", None)  # the driver's own words, without SQLAlchemy's SQL text
    words = " ".join(str(orig if orig is not None else exc).split())[:300]
    if "disk is full" in words or "No space left" in words:
        why = "cannot write: the disk under it is full"
    else:
        why = "does not answer"
    return StoreUnavailable(f"the report store {why} ({words})")


#: The exit status of each kind of error (docs/cli.md#exit-statuses): what the command needs
#: does not answer or is busy (the report store, the set registry, a Ray cluster): 3, as a
#: ``--url`` call's service that does not answer; any other typed error: usage, 2.
EXITS: tuple[tuple[type[WaiError], int], ...] = (
    (Unavailable, EXIT_UNREACHABLE),
    (Busy, EXIT_UNREACHABLE),
    (WaiError, EXIT_USAGE),
)


def exit_status(error: type[WaiError]) -> int:
    """The exit status of an error of this class: its first class in :data:`EXITS`, in
    method-resolution order (as the HTTP layer finds its status)."""
    exits = dict(EXITS)
    return next(exits[c] for c in error.__mro__ if c in exits)


def report(exc: WaiError, args: argparse.Namespace) -> int:
    """The typed error on stderr, one line per problem; its exit status, by its kind."""
    status = exit_status(type(exc))
    if getattr(args, "json", False):
        print(json.dumps({"error": exc.to_json()}), file=sys.stderr)
        return status
    # The one-line promise, whatever the text: one line per problem (every bad setting).
    for problem in getattr(exc, "problems", None) or [exc.message]:
        message = " ".join(str(problem).split())
        print(f"wai-dispatch: error: {exc.code}: {message}", file=sys.stderr)
    return status
