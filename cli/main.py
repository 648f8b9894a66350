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

# Each command, in the order `--help` lists them: the module that defines it (with ``add(sub)``)
# and its one-line help. A command's module is imported only when that command runs, so
# `--help` and every command load only what they use; tests/project/test_architecture.py holds this
# table equal to what the modules declare.
COMMANDS: dict[str, tuple[str, str]] = {
    "decode": ("decode", "decode an envelope (JSON or CBOR) to a PNG"),
    "demo": ("decode", "decode the bundled sample envelopes with the bundled sets"),
    "verify": ("verify", "§6.4 agreement of every path here on each set's payload"),
    "paths": ("paths", "each offered path: present, or absent and why"),
    "plan": ("paths", "a path's placement for a set, without decoding (§5)"),
    "sets": ("sets", "the parameter sets in the local store"),
    "serve": ("serve", "run the HTTP decoder service"),
    "tokens": ("serve", "bearer tokens of the service (sink, operator, admin)"),
    "import-compressai": (
        "tools",
        "turn what CompressAI's net.compress() produced into an envelope for a set",
    ),
    "make-set": ("tools", "write a parameter set (needs the tools extra)"),
    "explain": ("explain", "the tier a decode needs and which offered paths §3 admits"),
    "policy": ("policy", "the model policy fleet run reports are held to"),
    "reports": ("reports", "the report store's retention (prune old reports)"),
}


class Parser(argparse.ArgumentParser):
    """argparse whose own errors keep the one-line promise: ``wai-dispatch: error:
    invalid_argument: …``, one line that names where the usage is (``--help``); exit 2.
    Sub-command parsers are made of this class too (``add_subparsers`` uses the parent's
    class)."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        hint = f"{self.prog} --help"
        self.exit(2, f"wai-dispatch: error: invalid_argument: {line} (usage: {hint})\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; for ``argv``, with only the module of the command it names (the others are
    listed by name and help). Without ``argv``: every command's module, the whole parser."""
    parser = Parser(
        prog="wai-dispatch",
        description="Decode learned-codec envelopes on the unit the WAI Neural Dispatch rules "
        "choose, and report the choice (wai-neural-dispatch/1).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if argv is None:
        wanted = {module for module, _ in COMMANDS.values()}
    else:
        named = next((arg for arg in argv if not arg.startswith("-")), None)
        wanted = {COMMANDS[named][0]} if named in COMMANDS else set()
    loaded: set[str] = set()
    for command, (module, help) in COMMANDS.items():
        if module in loaded:
            continue
        if module in wanted:
            importlib.import_module(f"wai_dispatch.cli.{module}").add(sub)
            loaded.add(module)
        else:
            sub.add_parser(command, help=help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
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
