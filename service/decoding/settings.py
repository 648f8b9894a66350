"""The one configuration of wai-dispatch: every ``WAI_…`` knob of the CLI, the tools and the
service, read once per process by :func:`load` (flags over the environment over an optional
TOML file named by ``WAI_CONFIG`` over the defaults) and validated before anything starts.

This is the only module that reads a ``WAI_*`` variable (a test walks the package). Every bad
value is one problem of :class:`SettingsInvalid` (the CLI prints one line each); a ``WAI_*``
variable that is no setting is warned about by name. ``wai-dispatch serve --workers N`` hands
its effective settings to uvicorn's worker processes through :func:`hand_over` (one variable
this module owns, :data:`HANDOVER_ENV`), so that every worker's settings are the parent's."""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wai_dispatch.service.decoding.settings_model import (
    PREFIX,
    Settings,
    SettingsInvalid,
    _config_file,
)

__all__ = [
    "CONFIG_ENV",
    "HANDOVER_ENV",
    "NOT_SETTINGS",
    "PREFIX",
    "SECRET",
    "Settings",
    "SettingsInvalid",
    "env_name",
    "hand_over",
    "handed_over",
    "known_variables",
    "load",
    "sources",
    "unknown_variables",
]

log = logging.getLogger("wai_dispatch.settings")

#: The TOML file of settings, under the environment.
CONFIG_ENV = "WAI_CONFIG"
#: The effective settings of a parent process as JSON (``serve --workers``): read first.
HANDOVER_ENV = "WAI_SETTINGS_HANDOVER"
#: ``WAI_*`` variables that are no setting of the program: knobs of the test suite and the
#: benchmarks, never warned about.
NOT_SETTINGS = frozenset(
    {
        "WAI_BENCH_SMOKE",
        "WAI_FUZZ_EXAMPLES",
        "WAI_FULL_CORPUS",
        "WAI_NPU_SET",  # §8's evidence: the neural-processor set (tests/decoding/)
        "WAI_REGEN_GOLDEN",
        "WAI_REQUIRE_BROWSER",
        "WAI_REQUIRE_GPU",
        "WAI_REQUIRE_NPU_SET",
        "WAI_REQUIRE_WEBNN",
        "WAI_SCHEMATHESIS_EXAMPLES",
    }
)
#: Settings whose value a problem line never repeats.
SECRET = frozenset({"token", "database_url"})


def env_name(field: str) -> str:
    return PREFIX + field.upper()


def known_variables() -> frozenset[str]:
    """The ``WAI_*`` variables this program reads: the settings', ``WAI_CONFIG`` and the
    hand-over."""
    return frozenset(env_name(f) for f in Settings.model_fields) | {CONFIG_ENV, HANDOVER_ENV}


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One line per ``WAI_*`` variable of ``environ`` that is no setting (a close match
    suggested)."""
    known = known_variables()
    lines = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper in known or upper in NOT_SETTINGS:
            continue
        close = difflib.get_close_matches(upper, sorted(known - {HANDOVER_ENV}), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"{name} is not a setting of wai-dispatch; ignored{hint}")
    return lines


def _problem(error: Mapping[str, Any]) -> str:
    loc = [str(p) for p in error["loc"]]
    field = loc[0] if loc else ""
    msg = str(error["msg"]).removeprefix("Value error, ")
    if field in Settings.model_fields:
        where = f"{field} ({env_name(field)})"
        given = error.get("input")
        if field not in SECRET and isinstance(given, str | int | float | os.PathLike):
            where = f"{where} = {str(given)[:60]!r}"
    elif error.get("type") == "extra_forbidden":
        return f"{'.'.join(loc)}: not a setting (in the {CONFIG_ENV} file or given)"
    else:
        where = ".".join(loc) or "settings"
    return f"{where}: {msg}"


def load(warn: Callable[[str], None] | None = None, **overrides: Any) -> Settings:
    """The settings of this process: ``overrides`` (the command's flags; ``None`` is not
    given) over the environment over the ``WAI_CONFIG`` file over the defaults, or, in a worker
    of ``serve``, the parent's (:func:`hand_over`) under ``overrides``. Raises
    :class:`SettingsInvalid` naming every bad setting; an unknown ``WAI_*`` variable is passed
    to ``warn`` (default: a log warning), one line each."""
    given = {k: v for k, v in overrides.items() if v is not None}
    handed = os.environ.get(HANDOVER_ENV)
    if handed:
        try:
            return Settings.model_validate({**Settings.model_validate_json(handed).model_dump(),
                                            **given})  # fmt: skip
        except ValidationError as exc:
            raise SettingsInvalid(_problem(e) for e in exc.errors()) from None
    for line in unknown_variables(os.environ):
        (warn or log.warning)(line)
    problems: list[str] = []
    config: Path | None = None
    path = os.environ.get(CONFIG_ENV)
    if path:
        try:
            tomllib.loads(Path(path).read_text())
            config = Path(path)
        except IsADirectoryError:
            problems.append(f"{CONFIG_ENV} names {path}, which is not a file")
        except FileNotFoundError:
            problems.append(f"{CONFIG_ENV} names {path}, which is not a file")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            problems.append(f"{CONFIG_ENV} file {path} does not read as TOML: {exc}")
    reset = _config_file.set(config)
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        problems += [_problem(e) for e in exc.errors()]
    finally:
        _config_file.reset(reset)
    if problems:
        raise SettingsInvalid(problems)
    return settings


def sources(**overrides: Any) -> dict[str, str]:
    """Where each setting's value comes from, as :func:`load` reads them (``wai-dispatch
    config``): ``flag`` (an override given), ``handover`` (a parent's, ``serve --workers``),
    ``env`` (``WAI_<NAME>``), ``file`` (the ``WAI_CONFIG`` TOML file) or ``default``."""
    given = {k for k, v in overrides.items() if v is not None}
    environ = {name.upper() for name in os.environ}
    in_file: set[str] = set()
    path = os.environ.get(CONFIG_ENV)
    if path:
        with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            in_file = set(tomllib.loads(Path(path).read_text()))
    handed = bool(os.environ.get(HANDOVER_ENV))
    out: dict[str, str] = {}
    for field in Settings.model_fields:
        if field in given:
            out[field] = "flag"
        elif handed:
            out[field] = "handover"
        elif env_name(field) in environ:
            out[field] = "env"
        elif field in in_file:
            out[field] = "file"
        else:
            out[field] = "default"
    return out


@contextlib.contextmanager
def handed_over(settings: Settings) -> Iterator[None]:
    """:func:`hand_over` for the length of a block (a service started in a thread of this
    process, whose factory reads its settings at start), then what was there before."""
    before = os.environ.get(HANDOVER_ENV)
    hand_over(settings)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(HANDOVER_ENV, None)
        else:
            os.environ[HANDOVER_ENV] = before


def hand_over(settings: Settings) -> None:
    """Make ``settings`` the settings of every process this one starts from now on (uvicorn's
    workers), through :data:`HANDOVER_ENV`: their :func:`load` reads them first."""
    os.environ[HANDOVER_ENV] = settings.model_dump_json()
