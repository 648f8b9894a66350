"""Options several sub-commands share, declared once, and the command's settings (its flags over
the environment, :func:`settings`). Light on purpose: ``cli/main.py`` imports it before any
command's module (the decoder comes from :mod:`cli.context`)."""

from __future__ import annotations

import argparse
import sys

from wai_dispatch.service.decoding.settings import Settings, load

OFFER_HELP = "paths in order (default: WAI_OFFER or the reference offer)"


def setting_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """Mark ``names`` (the parser's destinations) as flags that override the settings of the
    same name (``--data-dir`` over ``WAI_DATA_DIR``): :func:`settings` hands them to
    :func:`service.decoding.settings.load`."""
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


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    """``--data-dir DIR``: where the set store lives. Kept as text, so that an empty value is
    refused (``settings_invalid``) rather than read as the working directory."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the set store lives (default: WAI_DATA_DIR or XDG's)",
    )
    setting_flags(parser, "data_dir")


def _warn(line: str) -> None:
    print(f"wai-dispatch: warning: {line}", file=sys.stderr)


def settings(args: argparse.Namespace) -> Settings:
    """The command's settings, loaded once (``wai-dispatch`` loads them before the command
    runs and keeps them as ``args.settings``): its setting flags over the environment over the
    ``WAI_CONFIG`` file over the defaults. An unknown ``WAI_*`` variable is one warning line
    on stderr; bad values raise :class:`service.decoding.settings.SettingsInvalid`."""
    chosen: Settings | None = getattr(args, "settings", None)
    if chosen is None:
        flags = {name: getattr(args, name, None) for name in getattr(args, "setting_flags", ())}
        chosen = load(warn=_warn, **flags)
        args.settings = chosen
    return chosen
