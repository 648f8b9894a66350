"""``wai-dispatch``: one sub-command per module in ``cli/``; each module has ``add(sub)``.

Every typed error (:class:`dispatch.WaiError`) ends the command with its code and a one-line
message on stderr and exit status 2; nothing prints a traceback for a user's mistake.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from wai_dispatch.cli.options import settings
from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError

# Modules that define sub-commands, in the order `--help` lists them.
COMMANDS = tuple(
    f"wai_dispatch.cli.{name}"
    for name in ("decode", "verify", "paths", "sets", "serve", "tools", "explain", "policy")
)


class Parser(argparse.ArgumentParser):
    """argparse whose own errors keep the one-line promise: ``wai-dispatch: error:
    invalid_argument: …`` first, the usage after it; exit 2. Sub-command parsers are made
    of this class too (``add_subparsers`` uses the parent's class)."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"wai-dispatch: error: invalid_argument: {line}\n{self.format_usage()}")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="wai-dispatch",
        description="Decode learned-codec envelopes on the unit the WAI Neural Dispatch rules "
        "choose, and report the choice (wai-neural-dispatch/1).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(name).add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings(args)  # read and validated once, before the command says anything
        status: int = args.func(args)
    except WaiError as exc:
        return _report(exc, args)
    except BrokenPipeError:  # `wai-dispatch … | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # The last net: the system refused something no typed error above names (a full
        # disk under the data directory, say). One line, never a traceback.
        where = f": {exc.filename}" if exc.filename else ""
        error = WaiError(f"{exc.strerror or exc}{where}", code=ErrorCode.IO_FAILED)
        return _report(error, args)
    except KeyboardInterrupt:
        return 130
    return status


def _report(exc: WaiError, args: argparse.Namespace) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": exc.to_json()}), file=sys.stderr)
        return 2
    # The one-line promise, whatever the text: one line per problem (every bad setting).
    for problem in getattr(exc, "problems", None) or [exc.message]:
        message = " ".join(str(problem).split())
        print(f"wai-dispatch: error: {exc.code}: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
