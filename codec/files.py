"""Reading and writing the files a user names safely: what the CLI reads (an envelope, a
CompressAI file) and what it writes (a PNG, an envelope). The store's own files are opened by
:mod:`codec.sets.regular`.

- :func:`read_regular` opens only a regular file (checked before opening, and again on the
  opened descriptor: a FIFO swapped in between is opened without blocking, ``O_NONBLOCK``,
  then refused) and reads at most ``limit`` bytes: ``/dev/zero`` or an 8 GiB sparse file is
  refused from its type or its size, never read into memory.
- :func:`write_atomic` writes a temporary file in the target's folder and renames it into
  place, so a failed write leaves the target as it was; an output that is one of the inputs
  (the same file, through a link or a hard link too) is refused before anything is written.

Every failure is a typed one-line :class:`FileError` (docs/errors.md)::

    FileError            file_unreadable: a file that cannot be read (missing, no permission)
    ├── FileNotRegular   file_not_regular: a folder, FIFO, device or socket where a file belongs
    ├── FileTooLarge     file_too_large: over the limit for what the file holds
    ├── FileUnwritable   file_unwritable: an output that cannot be written (the reason why)
    └── OutputIsInput    output_is_input: the output path names an input file
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from wai_dispatch.codec.errors import CodecError

_CHUNK = 1 << 20


class FileError(CodecError):
    """a file named on the command line cannot be read (missing, no permission)"""

    code = "file_unreadable"


class FileNotRegular(FileError):
    """a folder, FIFO, device or socket named where a file belongs (checked before and after
    opening; never read)"""

    code = "file_not_regular"


class FileTooLarge(FileError):
    """a file over the limit for what it holds, refused from its size before it is read (an
    envelope file is `envelope_too_large`)"""

    code = "file_too_large"


class FileUnwritable(FileError):
    """an output that cannot be written (its folder is missing, it is a folder or a device, a file
    is in the way, the disk is full, the place is read-only); the target is left as it was"""

    code = "file_unwritable"


class OutputIsInput(FileError):
    """an output path that names an input file (the same file, a link or a hard link to it)"""

    code = "output_is_input"


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, in words, when it is not a regular file."""
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def read_regular(
    path: Path,
    *,
    limit: int,
    what: str = "file",
    too_large: type[CodecError] = FileTooLarge,
) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit`` of them.

    The type is checked before opening (a device is never opened) and on the descriptor
    after (the file may have been swapped); the size is checked from ``fstat`` before reading
    and again by reading at most one byte past ``limit``.
    """
    try:
        before = os.stat(path)
    except OSError as exc:
        raise FileError(f"cannot read {what} {path}: {_why(exc)}") from None
    if not stat.S_ISREG(before.st_mode):
        raise FileNotRegular(f"{what} {path} is {file_kind(before.st_mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise FileError(f"cannot read {what} {path}: {_why(exc)}") from None
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode):
            raise FileNotRegular(f"{what} {path} is {file_kind(after.st_mode)}, not a regular file")
        if after.st_size > limit:
            raise too_large(f"{what} {path}: {after.st_size} bytes, over the limit of {limit}")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # the file grew while it was read
            raise too_large(f"{what} {path}: over the limit of {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise FileError(f"cannot read {what} {path}: {_why(exc)}") from None
    finally:
        os.close(fd)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_output(path: Path, *, inputs: Iterable[Path] = ()) -> None:
    """Refuse an output path that cannot be a new or replaced regular file, or that names one
    of ``inputs`` (compared by device and inode: links and hard links included)."""
    try:
        target = os.stat(path)
    except FileNotFoundError:
        target = None
    except NotADirectoryError:
        raise FileUnwritable(f"cannot write {path}: a file is in the way of its folder") from None
    except OSError as exc:
        raise FileUnwritable(f"cannot write {path}: {_why(exc)}") from None
    if target is not None:
        if not stat.S_ISREG(target.st_mode):
            raise FileUnwritable(f"cannot write {path}: it is {file_kind(target.st_mode)}")
        for source in inputs:
            try:
                same = _same_file(target, os.stat(source))
            except OSError:
                continue
            if same:
                raise OutputIsInput(f"the output {path} is the input {source}: refused")
    parent = path.parent
    try:
        folder = os.stat(parent)
    except FileNotFoundError:
        raise FileUnwritable(f"cannot write {path}: the folder {parent} does not exist") from None
    except NotADirectoryError:
        raise FileUnwritable(f"cannot write {path}: a file is in the way of its folder") from None
    except OSError as exc:
        raise FileUnwritable(f"cannot write {path}: {_why(exc)}") from None
    if not stat.S_ISDIR(folder.st_mode):
        raise FileUnwritable(f"cannot write {path}: {parent} is a file, not a folder")


def write_atomic(path: Path, data: bytes, *, inputs: Iterable[Path] = ()) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, renamed into
    place once it is complete and synced. The new file gets the mode a plain write would
    (the replaced file's, else 0666 less the umask)."""
    inputs = list(inputs)
    check_output(path, inputs=inputs)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise FileUnwritable(f"cannot write {path}: {_why(exc)}") from None
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise FileUnwritable(f"cannot write {path}: the disk is full") from None
        raise FileUnwritable(f"cannot write {path}: {_why(exc)}") from None
    except BaseException:
        _remove(tmp)
        raise


def make_folder(path: Path) -> None:
    """``mkdir -p`` for an output folder, with a typed error for each way it fails."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise FileUnwritable(f"cannot make the folder {path}: a file is in the way") from None
    except NotADirectoryError:
        raise FileUnwritable(f"cannot make the folder {path}: a file is in the way") from None
    except OSError as exc:
        raise FileUnwritable(f"cannot make the folder {path}: {_why(exc)}") from None


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
