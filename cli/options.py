"""The command's settings (its flags over the environment, :func:`settings`), and its answer
as JSON or text (:func:`emit`). Loads the settings module (pydantic): ``cli/main.py`` imports
it only once a command runs, never for ``--help``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from wai_dispatch.service.settings import Settings, load


def _warn(line: str) -> None:
    print(f"wai-dispatch: warning: {line}", file=sys.stderr)


def overrides(args: argparse.Namespace) -> dict[str, object]:
    """The setting flags the command was given (``None``: not given)."""
    return {name: getattr(args, name, None) for name in getattr(args, "setting_flags", ())}


def emit(args: argparse.Namespace, obj: Any, text: str) -> None:
    """``obj`` as indented JSON with ``--json``, else ``text``."""
    print(json.dumps(obj, indent=2, ensure_ascii=False) if args.json else text)


def settings(args: argparse.Namespace) -> Settings:
    """The command's settings, loaded once (``wai-dispatch`` loads them before the command
    runs and keeps them as ``args.settings``): its setting flags over the environment over the
    ``WAI_CONFIG`` file over the defaults. An unknown ``WAI_*`` variable is one warning line
    on stderr; bad values raise :class:`service.settings.SettingsInvalid`."""
    chosen: Settings | None = getattr(args, "settings", None)
    if chosen is None:
        chosen = load(warn=_warn, **overrides(args))
        args.settings = chosen
    return chosen
