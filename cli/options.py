"""Options several sub-commands share, declared once; the command's settings (its flags over
the environment, :func:`settings`) and the one way a command gets its
:class:`service.decoding.decoder.Decoder` from them."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.decoding.settings import Settings

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
        from wai_dispatch.service.decoding.settings import load

        flags = {name: getattr(args, name, None) for name in getattr(args, "setting_flags", ())}
        chosen = load(warn=_warn, **flags)
        args.settings = chosen
    return chosen


def decoder(args: argparse.Namespace, *, bundled: bool = True, ready: bool = True) -> Decoder:
    """The command's decoder, from its settings (``--data-dir`` and ``--offer`` where it has
    them; :meth:`service.decoding.decoder.Decoder.open`)."""
    from wai_dispatch.service.decoding.decoder import Decoder

    return Decoder.open(settings=settings(args), bundled=bundled, ready=ready)
