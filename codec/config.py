"""Where wai-dispatch keeps its data: the data directory and the set store under it."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """``override``, else ``$WAI_DATA_DIR``, else ``$XDG_DATA_HOME/wai-dispatch``, else
    ``~/.local/share/wai-dispatch`` (the XDG base directory default)."""
    if override:
        return Path(override).expanduser()
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
