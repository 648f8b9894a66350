"""``-`` for a file argument: standard input where a file is read, standard output where one is
written (``decode - -o -``). A real file named ``-`` is ``./-``. Input from stdin is held to
the same limit as a file's; output to stdout is written as it is, never to a file named ``-``."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from wai_dispatch.cli.flags import is_stdio
from wai_dispatch.codec.envelope import EnvelopeTooLarge
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.files import FileTooLarge, check_output, read_regular, write_atomic
from wai_dispatch.setfacts.limits import Limits


def read_input(
    path: Path, *, limit: int, what: str = "file", too_large: type[CodecError] = FileTooLarge
) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit`` of them."""
    if not is_stdio(path):
        return read_regular(path, limit=limit, what=what, too_large=too_large)
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise too_large(f"{what} on standard input: over the limit of {limit} bytes")
    return data


def check_target(path: Path, *, inputs: Iterable[Path] = ()) -> None:
    """:func:`codec.files.check_output` for a file; nothing to check for standard output."""
    if not is_stdio(path):
        check_output(path, inputs=[p for p in inputs if not is_stdio(p)])


def write_output(path: Path, data: bytes, *, inputs: Iterable[Path] = ()) -> None:
    """``data`` to ``path`` atomically (:func:`codec.files.write_atomic`), or to standard
    output for ``-``."""
    if is_stdio(path):
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    write_atomic(path, data, inputs=[p for p in inputs if not is_stdio(p)])


def read_envelope(path: Path) -> bytes:
    """The envelope file at ``path`` (``-``: standard input), refused (``envelope_too_large``)
    past the codec's limit."""
    limit = Limits().max_envelope_bytes
    return read_input(path, limit=limit, what="envelope", too_large=EnvelopeTooLarge)
