"""``wai-dispatch``: one sub-command per entry of :data:`COMMANDS`; each command's parser is
declared in ``cli/parsers/<module>.py`` (``add(sub)``, the standard library only) and names the
function that runs it (``module:function`` of ``wai_dispatch.cli``), imported only when the
command runs. ``--help`` and ``COMMAND --help`` load no decoder, no settings, no runtime.

Every typed error (:class:`dispatch.WaiError`) ends the command with its code and a one-line
message on stderr; the exit statuses are :mod:`cli.flags`' (docs/cli.md#exit-statuses).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from wai_dispatch.cli.flags import COMMANDS, EXIT_OK, EXIT_TABLE, Parser

TYPE_CHECKING = False  # typing's own costs ~4 ms of the sink client's start-up
if TYPE_CHECKING:
    from typing import Any


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from wai_dispatch.cli.run import version  # importlib.metadata: ~60 ms, only here

        print(f"wai-dispatch {version()}")  # on stdout, as `--help` is
        parser.exit(EXIT_OK)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; for ``argv`` that names a command, with only that command's parser module;
    for another ``argv`` (``--help``, an unknown command), every command by name and help.
    Without ``argv``: every command, the whole parser."""
    parser = Parser(
        prog="wai-dispatch",
        description="Decode learned-codec envelopes on the unit the WAI Neural Dispatch rules "
        "choose, and report the choice (wai-neural-dispatch/1).",
        epilog=f"{EXIT_TABLE}\n\n'-' names standard input or output wherever a file is read or "
        "written.\nexample:\n  wai-dispatch decode envelope.json -o picture.png\n"
        "  wai-dispatch COMMAND --help",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = None if argv is None else next((a for a in argv if not a.startswith("-")), None)
    if named in COMMANDS:
        # a command is named: its parser module alone (a parser costs ~5 ms of argparse and
        # gettext look-ups; the sink's client is held to twice `python -c pass`)
        importlib.import_module(f"wai_dispatch.cli.parsers.{COMMANDS[named][0]}").add(sub)
        return parser
    loaded: set[str] = set()
    for command, (module, help) in COMMANDS.items():
        if module in loaded:
            continue
        if argv is None:
            importlib.import_module(f"wai_dispatch.cli.parsers.{module}").add(sub)
            loaded.add(module)
        else:  # `--help`, or no or an unknown command: the list of commands, by name and help
            sub.add_parser(command, help=help)
    return parser


def runner(
    args: argparse.Namespace, target: str | None = None
) -> Callable[[argparse.Namespace], int]:
    """The function that runs the parsed command (its parser's ``run``, ``module:function``,
    or ``target``)."""
    module, function = str(target or args.run).split(":")
    found: Callable[[argparse.Namespace], int] = getattr(
        importlib.import_module(f"wai_dispatch.cli.{module}"), function
    )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    remote = getattr(args, "run_remote", None)
    if remote and getattr(args, "url", None):
        # the sink's client: the standard library and the HTTP client only; no settings
        # model, no core, no decoder (docs/cli.md#the-sinks-client)
        from wai_dispatch.cli.remote import execute as execute_remote

        return execute_remote(args, runner(args, remote))
    # the error tree, the settings and the command's module: after parsing, so that --help
    # and a usage error load none of them
    from wai_dispatch.cli.run import execute

    return execute(args, runner(args))


if __name__ == "__main__":
    sys.exit(main())
