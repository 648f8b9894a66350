"""The data directory's layout: pure path helpers over a data directory the caller gives (the
set store is ``<data_dir>/sets``). Where the data directory is (``WAI_DATA_DIR``, else XDG's) is
a setting: :class:`service.settings.Settings` resolves it. Also the codec's one output
default the settings read (:data:`DEFAULT_PNG_LEVEL`), kept here, free of numpy, so that reading
the settings imports no array library."""

from __future__ import annotations

import os
from pathlib import Path

from wai_dispatch.codec.errors import CodecError

#: The zlib level of a decode's PNG by default (the ``png_level`` setting): level 1 took a
#: fifth of level 6's time for about 10% more bytes (tools/bench_answer.py, docs/service.md).
DEFAULT_PNG_LEVEL = 1


class DataDirInvalid(CodecError):
    """a data directory that is empty, a file, or cannot be created or read"""

    code = "data_dir_invalid"


def check_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    """``data_dir`` as a path, ``~`` expanded; an empty one (``--data-dir ""``) is
    :class:`DataDirInvalid`, never the working directory."""
    text = os.fspath(data_dir)
    if not str(text).strip():
        raise DataDirInvalid("the data directory is empty: give a folder")
    return Path(text).expanduser()


def set_store_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The set store's root: ``<data_dir>/sets`` (docs/sets.md)."""
    return check_data_dir(data_dir) / "sets"


def ready_set_store_dir(data_dir: str | os.PathLike[str]) -> Path:
    """:func:`set_store_dir`, created when absent; a file in the way, or a folder that cannot be
    created or read, is :class:`DataDirInvalid` (one line, the path and why)."""
    root = set_store_dir(data_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        os.listdir(root)
    except (FileExistsError, NotADirectoryError):
        raise DataDirInvalid(f"data directory {root.parent}: a file is in the way") from None
    except OSError as exc:
        raise DataDirInvalid(
            f"data directory {root.parent}: cannot be created or read ({exc.strerror or exc})"
        ) from None
    return root
