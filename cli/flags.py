"""What every command's parser shares, light on purpose (the standard library only): the parser
class that keeps the one-line promise, the options several commands declare once, and the
exit statuses (docs/cli.md#exit-statuses). ``wai-dispatch --help`` and every ``COMMAND --help``
load this module and the command's parser module, nothing of the decoder."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

TYPE_CHECKING = False  # typing's own costs ~4 ms of the sink client's start-up
if TYPE_CHECKING:
    from typing import Any, NoReturn, TypeAlias

    Sub: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
else:
    Sub = argparse._SubParsersAction


#: The exit statuses of every command (docs/cli.md lists them; ``--help`` prints them).
EXIT_OK = 0
EXIT_NO = 1  # a negative answer: no path, verify fails, a policy refuses, doctor finds a fault
EXIT_USAGE = 2  # the command line, its settings or its input do not hold (one typed line)
EXIT_UNREACHABLE = 3  # what the command needs does not answer: --url's service, the store
EXIT_REFUSED = 4  # --url: the service refused the call (401, 403, 4xx): its code, its words
EXIT_INTERRUPTED = 130  # Ctrl-C

EXIT_TABLE = f"""exit status:
  {EXIT_OK}    ok
  {EXIT_NO}    a negative answer: no path, verify fails, a policy refuses, doctor finds a fault
  {EXIT_USAGE}    usage: a bad flag, setting or input (one line: wai-dispatch: error: CODE: …)
  {EXIT_UNREACHABLE}    no answer: --url's service (connection, timeout, 5xx or 429 after the
       retries), the report store, the set registry, a Ray cluster (one typed line)
  {EXIT_REFUSED}    --url: the service refused the call (token, role, 4xx), in its words
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"""

# Each command, in the order `--help` lists them: the parser module that declares it (with
# ``add(sub)``, in cli/parsers/) and its one-line help (:func:`command` gives it the command).
# Only the named command's parser module is imported (cli/main.py).
COMMANDS: dict[str, tuple[str, str]] = {
    "decode": ("decode", "decode an envelope (JSON or CBOR) to a PNG"),
    "demo": ("decode", "decode the bundled sample envelopes with the bundled sets"),
    "report": ("decode", "post a run report (wai-run-report/1) to the service; print its verdict"),
    "verify": ("verify", "§6.4 agreement of every path here on each set's payload"),
    "evidence": ("verify", "§8's figures for every path present here, as JSON and a table"),
    "paths": (
        "placement",
        "every path this build knows: offered or not, present or absent and why",
    ),
    "plan": ("placement", "a path's placement for a set, without decoding (§5)"),
    "sets": ("sets", "the parameter sets (the set registry, cached here)"),
    "serve": ("serve", "run the HTTP decoder service"),
    "tokens": ("serve", "bearer tokens of the service (sink, operator, admin)"),
    "import-compressai": (
        "tools",
        "turn what CompressAI's net.compress() produced into an envelope for a set",
    ),
    "make-set": ("tools", "write a parameter set (needs the tools extra)"),
    "encode": (
        "encode",
        "encode a picture (PNG, JPEG, PPM) to an envelope for a set (needs the tools extra)",
    ),
    "explain": ("explain", "the tier a decode needs and which offered paths §3 admits"),
    "policy": ("policy", "the model policy fleet run reports are held to"),
    "config": ("ops", "the effective settings and where each came from"),
    "doctor": ("ops", "check this machine: data dir, store, sets, paths, browser and GPU"),
    "completion": ("ops", "print a shell completion script (bash or zsh)"),
    "reports": ("reports", "the report store's retention (prune old reports)"),
}


OFFER_HELP = "paths in order (default: WAI_OFFER or the reference offer)"
#: ``-`` for a file argument: standard input (read) or standard output (write).
STDIO = "-"


def is_stdio(path: Path | str | None) -> bool:
    """Whether ``path`` is the ``-`` that names standard input or output."""
    return path is not None and str(path) == STDIO


class Parser(argparse.ArgumentParser):
    """argparse whose own errors keep the one-line promise: ``wai-dispatch: error:
    invalid_argument: …``, one line that names where the usage is (``--help``); exit 2.
    Sub-command parsers are made of this class too (``add_subparsers`` uses the parent's
    class). Help keeps the epilog's lines (each command's example) as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def _get_formatter(self) -> argparse.HelpFormatter:
        # the terminal's width as shutil.get_terminal_size() gives it, without importing
        # shutil (bz2, lzma, fnmatch: ~3 ms of every command's start-up, argparse's own
        # formatter asks for it on every add_argument)
        try:
            columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size().columns
        except (ValueError, OSError):
            columns = 80
        make: Any = self.formatter_class  # typeshed's protocol names `prog` alone
        formatter: argparse.HelpFormatter = make(prog=self.prog, width=max(columns, 20) - 2)
        return formatter

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        hint = f"{self.prog} --help"
        self.exit(EXIT_USAGE, f"wai-dispatch: error: invalid_argument: {line} (usage: {hint})\n")


def command(
    sub: Sub, name: str, example: str, help: str | None = None, **kwargs: Any
) -> argparse.ArgumentParser:
    """A sub-command's parser: its one-line help (a command's: :data:`COMMANDS`'), and an
    epilog with its example(s)."""
    help = COMMANDS[name][1] if help is None else help
    lines = "\n".join(f"  {line}" for line in example.strip().splitlines())
    return sub.add_parser(name, help=help, description=help, epilog=f"example:\n{lines}", **kwargs)


def runs(parser: argparse.ArgumentParser, target: str, *, remote: str | None = None) -> None:
    """The function that runs the command, as ``module:function`` of ``wai_dispatch.cli``:
    imported only when the command runs (``cli/main.py``). ``remote``: the function that runs
    it when ``--url`` is given, through :func:`cli.remote.execute` (no settings model, no
    decoder: the sink's client)."""
    parser.set_defaults(run=target, run_remote=remote)


def setting_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """Mark ``names`` (the parser's destinations) as flags that override the settings of the
    same name (``--data-dir`` over ``WAI_DATA_DIR``): :func:`cli.options.settings` hands them
    to :func:`service.settings.load`."""
    marked = tuple(parser.get_default("setting_flags") or ())
    parser.set_defaults(setting_flags=(*marked, *names))


def add_offer(
    parser: argparse.ArgumentParser, help: str = OFFER_HELP, *, setting: bool = True
) -> None:
    """``--offer unit/backend/arithmetic …``: the paths to try, in order (§4); ``setting``:
    it overrides the ``offer`` setting (``WAI_OFFER``)."""
    parser.add_argument("--offer", nargs="+", metavar="UNIT/BACKEND/ARITH", help=help)
    if setting:
        setting_flags(parser, "offer")


DATA_DIR_HELP = "where the set store lives (default: WAI_DATA_DIR or XDG's)"


def add_data_dir(parser: argparse.ArgumentParser, help: str = DATA_DIR_HELP) -> None:
    """``--data-dir DIR``: the data directory. Kept as text, so that an empty value is
    refused (``settings_invalid``) rather than read as the working directory."""
    parser.add_argument("--data-dir", metavar="DIR", help=help)
    setting_flags(parser, "data_dir")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def verb_options(data_dir_help: str = DATA_DIR_HELP) -> argparse.ArgumentParser:
    """The options every verb of a command with verbs (``sets``, ``policy``, ``tokens``) takes,
    as a parent parser: ``--json`` and ``--data-dir``."""
    common = argparse.ArgumentParser(add_help=False)
    add_json(common)
    add_data_dir(common, data_dir_help)
    return common
