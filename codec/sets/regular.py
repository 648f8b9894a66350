"""Opening the store's files only when they are regular: a FIFO, a device or a link put where
a set file belongs is refused (:class:`NotRegularFile`, ``set_unsafe_entry`` in the store)
before anything blocks on it or reads through it; writing the store's own files atomically.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from wai_dispatch.codec.files import file_kind

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class NotRegularFile(OSError):
    """The path names a FIFO, a socket, a device, a directory or a link, not a regular file."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file, without following a link.

    Checked before opening (``lstat``: a FIFO is never opened, so nothing blocks), opened with
    ``O_NOFOLLOW | O_NONBLOCK``, and checked again after (``fstat``: the file opened is the one
    checked, not one swapped in between). Raises :class:`FileNotFoundError` when absent and
    :class:`NotRegularFile` for anything else in its place.
    """
    before = os.lstat(path)
    if not stat.S_ISREG(before.st_mode):
        raise NotRegularFile(errno.EINVAL, f"{file_kind(before.st_mode)}, not a file", str(path))
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link swapped in after the check
            raise NotRegularFile(errno.ELOOP, "a link, not a file", str(path)) from None
        raise
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise NotRegularFile(errno.EINVAL, "replaced while being opened", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write a uniquely named temporary file beside ``path`` and rename it into place; a failed
    write removes the temporary file and leaves ``path`` as it was."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
