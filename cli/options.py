"""Options several sub-commands share, declared once, and the one way a command gets its
:class:`service.decoding.decoder.Decoder` from them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wai_dispatch.service.decoding.decoder import Decoder

OFFER_HELP = "paths in order (default: WAI_OFFER or the reference offer)"


def add_offer(parser: argparse.ArgumentParser, help: str = OFFER_HELP) -> None:
    """``--offer unit/backend/arithmetic …``: the paths to try, in order (§4)."""
    parser.add_argument("--offer", nargs="+", metavar="UNIT/BACKEND/ARITH", help=help)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    """``--data-dir DIR``: where the set store lives. Kept as text, so that an empty value is
    refused (``data_dir_invalid``) rather than read as the working directory."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where the set store lives (default: WAI_DATA_DIR or XDG's)",
    )


def decoder(args: argparse.Namespace, *, bundled: bool = True, ready: bool = True) -> Decoder:
    """The command's decoder, from ``--data-dir`` and ``--offer`` where it has them
    (:meth:`service.decoding.decoder.Decoder.open`)."""
    from wai_dispatch.service.decoding.decoder import Decoder

    return Decoder.open(
        data_dir=getattr(args, "data_dir", None),
        offer=getattr(args, "offer", None) or None,
        bundled=bundled,
        ready=ready,
    )
