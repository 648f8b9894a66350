"""What the decoding commands share beyond their options: the command's
:class:`service.decoding.decoder.Decoder` from its settings, and the envelope file read under
the codec's limit."""

from __future__ import annotations

import argparse
from pathlib import Path

from wai_dispatch.cli.options import settings
from wai_dispatch.codec.envelope import EnvelopeTooLarge
from wai_dispatch.codec.errors import Limits
from wai_dispatch.codec.files import read_regular
from wai_dispatch.service.decoding.decoder import Decoder


def decoder(args: argparse.Namespace, *, bundled: bool = True, ready: bool = True) -> Decoder:
    """The command's decoder, from its settings (``--data-dir`` and ``--offer`` where it has
    them; :meth:`service.decoding.decoder.Decoder.open`)."""

    return Decoder.open(settings=settings(args), bundled=bundled, ready=ready)


def read_envelope(path: Path) -> bytes:
    """The envelope file at ``path``, refused (``envelope_too_large``) past the codec's limit."""
    limit = Limits().max_envelope_bytes
    return read_regular(path, limit=limit, what="envelope", too_large=EnvelopeTooLarge)
