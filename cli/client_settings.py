"""The two settings of the sink's client (``decode --url``, ``report --url``), read without the
settings model: ``token`` and ``token_file``, with :class:`service.settings.Settings`' names and
precedence (the flag over ``WAI_TOKEN`` / ``WAI_TOKEN_FILE``, names read regardless of case,
over the ``WAI_CONFIG`` TOML file). A command that only talks to a service reads these two and
nothing else, so that it loads no pydantic and no decoder (docs/cli.md#the-sinks-client);
tests/decoding/test_settings.py holds :func:`bearer` equal to ``Settings.bearer()``.

With :mod:`service.settings`, the one other module that reads a ``WAI_*`` variable."""

from __future__ import annotations

import os
from pathlib import Path

TOKEN_ENV = "WAI_TOKEN"
TOKEN_FILE_ENV = "WAI_TOKEN_FILE"
CONFIG_ENV = "WAI_CONFIG"


class ClientSettingsInvalid(ValueError):
    """The ``WAI_CONFIG`` file does not read, or holds a token that is not a string."""


def _environ(name: str) -> str | None:
    found = [value for key, value in os.environ.items() if key.upper() == name]
    return found[-1] if found else None


def _config() -> dict[str, object]:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        return {}
    import tomllib  # only when a WAI_CONFIG file is named (~5 ms: the client's start-up)

    try:
        return tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ClientSettingsInvalid(
            f"{CONFIG_ENV} file {path} does not read as TOML: {exc}"
        ) from None


def bearer(token: str | None = None, token_file: Path | str | None = None) -> str | None:
    """The client's bearer token: ``token`` (the flag, else ``WAI_TOKEN``, else the config
    file's ``token``), stripped, when not blank; else the contents of ``token_file`` (the flag,
    ``WAI_TOKEN_FILE``, the file's ``token_file``), stripped; else ``None``."""
    config = _config()
    chosen = token if token is not None else _environ(TOKEN_ENV)
    in_file = config.get("token")
    if chosen is None and in_file is not None:
        if not isinstance(in_file, str):
            raise ClientSettingsInvalid(f"{CONFIG_ENV}: token is not a string")
        chosen = in_file
    if chosen and chosen.strip():
        return chosen.strip()
    where = token_file if token_file is not None else _environ(TOKEN_FILE_ENV)
    if where is None and config.get("token_file") is not None:
        where = str(config["token_file"])
    return Path(where).read_text().strip() if where else None
