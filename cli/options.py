"""Options several sub-commands share, declared once."""

from __future__ import annotations

import argparse

OFFER_HELP = "paths in order (default: WAI_OFFER or the reference offer)"


def add_offer(parser: argparse.ArgumentParser, help: str = OFFER_HELP) -> None:
    """``--offer unit/backend/arithmetic …``: the paths to try, in order (§4)."""
    parser.add_argument("--offer", nargs="+", metavar="UNIT/BACKEND/ARITH", help=help)
