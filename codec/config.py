"""Where wai-dispatch keeps its data (the data directory and the set store under it), and the
settings it reads from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch.codes import ErrorCode


class DataDirInvalid(CodecError):
    """A data directory that is empty, a file, or cannot be created or read."""

    code = ErrorCode.DATA_DIR_INVALID


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """``override``, else ``$WAI_DATA_DIR``, else ``$XDG_DATA_HOME/wai-dispatch``, else
    ``~/.local/share/wai-dispatch`` (the XDG base directory default). An empty ``override``
    (``--data-dir ""``) is :class:`DataDirInvalid`, never the working directory."""
    if override is not None:
        text = os.fspath(override)
        if not str(text).strip():
            raise DataDirInvalid("the data directory is empty: give a folder")
        return Path(text).expanduser()
    env = os.environ.get("WAI_DATA_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    # XDG says a relative XDG_DATA_HOME is invalid and is to be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "wai-dispatch"
    return Path.home() / ".local" / "share" / "wai-dispatch"


def sets_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The set store's root: ``<data_dir>/sets`` (docs/sets.md)."""
    return data_dir(override) / "sets"


def ready_sets_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """:func:`sets_dir`, created when absent; a file in the way, or a folder that cannot be
    created or read, is :class:`DataDirInvalid` (one line, the path and why)."""
    root = sets_dir(override)
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


# --- settings read from the environment, checked once at start -------------------------------

#: ONNX Runtime's intra-op thread count (paths/onnx.py); unset: the CPUs this process may use.
ORT_THREADS_ENV = "WAI_ORT_THREADS"


class ConfigInvalid(CodecError):
    """A setting in the environment that does not parse (``config_invalid``)."""

    code = ErrorCode.CONFIG_INVALID


def ort_threads() -> int | None:
    """``$WAI_ORT_THREADS`` as a count of threads >= 1; ``None`` when unset or empty."""
    text = os.environ.get(ORT_THREADS_ENV, "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ConfigInvalid(f"{ORT_THREADS_ENV} is a count of threads >= 1, not {text[:40]!r}")
    return int(text)


def check_environment() -> None:
    """Refuse a bad setting before any command runs (the CLI calls it first)."""
    ort_threads()
