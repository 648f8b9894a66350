"""What the decoding commands share beyond their options: the command's
:class:`service.decoding.decoder.Decoder` from its settings (the envelope file is read by
:func:`cli.streams.read_envelope`)."""

from __future__ import annotations

import argparse

from wai_dispatch.cli.options import settings
from wai_dispatch.service.decoding.decoder import Decoder


def decoder(args: argparse.Namespace, *, bundled: bool = True, ready: bool = True) -> Decoder:
    """The command's decoder, from its settings (``--data-dir`` and ``--offer`` where it has
    them; :meth:`service.decoding.decoder.Decoder.assemble`)."""

    return Decoder.assemble(**settings(args).decoder_args(bundled=bundled), ready=ready)
