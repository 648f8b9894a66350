"""The one configuration of a wai-dispatch process: every ``WAI_…`` knob of the CLI, the tools
and the service as a field of :class:`Settings` (its default, its check and what is derived from
it), read once per process, at its edge (the command line, ``serve``'s factory), by :func:`load`:
flags over the environment over an optional TOML file named by ``WAI_CONFIG`` over the
defaults, validated before anything starts. The decoding library reads none of it: the edge
hands a decoder its part, :meth:`Settings.decoder_args`.

This is the only module that reads a ``WAI_*`` variable besides the sink's client
(cli/client_settings.py; a test walks the packages). Every bad value is one problem of
:class:`SettingsInvalid` (the CLI prints one line each); a ``WAI_*`` variable that is no setting
is warned about by name. ``wai-dispatch serve --workers N`` hands its effective settings to
uvicorn's worker processes through :func:`hand_over` (:data:`HANDOVER_ENV`), so that every
worker's settings are the parent's."""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import importlib.util
import logging
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from wai_dispatch.codec.layout import DEFAULT_PNG_LEVEL, DataDirInvalid, check_data_dir
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.dispatch.offer import Offer, parse_offer
from wai_dispatch.service.decoding.errors import SettingsInvalid as SettingsInvalid

MiB = 1024 * 1024

PREFIX = "WAI_"

# The TOML file :func:`load` checked, for the sources of the Settings it builds.
_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "wai_config_file", default=None
)


_HTTP_FALLBACK: Literal["h11"] = "h11"


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (found, not imported)."""
    return importlib.util.find_spec(module) is not None


class DecoderArgs(TypedDict):
    """A decoder's part of the settings, as :meth:`Decoder.assemble` takes it."""

    data_dir: Path
    offer: Offer | None
    bundled: bool
    ort_threads: int | None
    png_level: int
    tile_bytes: int
    waiops_engine: str


def _xdg_data_dir() -> Path:
    """``$XDG_DATA_HOME/wai-dispatch``, else ``~/.local/share/wai-dispatch`` (the XDG base
    directory default; XDG says a relative ``XDG_DATA_HOME`` is to be ignored)."""
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "wai-dispatch"
    return Path.home() / ".local" / "share" / "wai-dispatch"


class Settings(BaseSettings):
    """Every knob of wai-dispatch; each is ``WAI_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="forbid", frozen=True)

    data_dir: Path = Field(
        default_factory=_xdg_data_dir,
        description="sets, store, spool; default $XDG_DATA_HOME/wai-dispatch or "
        "~/.local/share/wai-dispatch",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default sqlite:///<data_dir>/reports.db"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    workers: int = Field(
        default=1, ge=1, le=256, description="server processes of `serve` (uvicorn's workers)"
    )
    root_path: str = Field(
        default="",
        pattern=r"^(/[A-Za-z0-9._~-]+)*$",
        description="the path prefix a reverse proxy serves the service under (e.g. /wai); "
        "uvicorn's root_path",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="proxies whose X-Forwarded-For/-Proto are trusted (comma-separated "
        "addresses or networks, * for any); uvicorn's forwarded_allow_ips",
    )
    offer: str | None = Field(
        default=None, description="paths in order, comma-separated; default the reference offer"
    )
    decode_threads: int = Field(default=0, ge=0, le=64, description="decode threads; 0: CPUs")
    queue: int = Field(default=8, ge=0, le=10_000, description="decodes waiting beyond threads")
    decode_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    max_body_bytes: int = Field(default=16 * MiB, ge=1024)
    max_latent_elements: int = Field(
        default=192 * 256 * 256, ge=1, description="C×H×W, header (4096×4096 with bmshj2018)"
    )
    memory_budget_bytes: int = Field(default=1536 * MiB, ge=64 * MiB)
    tile_bytes: int = Field(
        default=256 * MiB,
        ge=MiB,
        description="one synthesis tile's activations at most (CPU paths; docs/onnx-path.md)",
    )
    png_level: int = Field(
        default=DEFAULT_PNG_LEVEL,
        ge=0,
        le=9,
        description="zlib level of the decoded PNG (0: stored … 9: smallest, slowest)",
    )
    spool_max_bytes: int = Field(default=256 * MiB, ge=MiB)
    report_group_commit: bool = Field(
        default=True,
        description="concurrent decodes' reports share one store transaction (group commit); "
        "off: one transaction per decode",
    )
    report_commit_window_ms: float = Field(
        default=2.0,
        ge=0,
        le=1000,
        description="group commit: how long a batch waits for more decodes' reports once "
        "decodes arrive together (a lone decode is committed at once)",
    )
    report_commit_max: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="group commit: reports a transaction holds at most (a full batch commits "
        "at once)",
    )
    min_free_bytes: int = Field(
        default=32 * MiB,
        ge=0,
        description="/readyz is not ready while the data or the spool volume has fewer free "
        "bytes; 0: not checked",
    )
    warm: bool = Field(
        default=True,
        description="build every installed set's program, and decode once through it, before "
        "/readyz says ready",
    )
    spool_dir: Path | None = Field(
        default=None,
        description="the spool volume, a folder per replica; default <data_dir>/spool",
    )
    replica_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9._-]{1,128}$",
        description="this replica's spool folder on the volume; default the host name",
    )
    program_cache_bytes: int = Field(default=512 * MiB, ge=MiB)
    ort_threads: int | None = Field(
        default=None, ge=1, le=256, description="ONNX Runtime's pool; default the CPUs"
    )
    waiops_engine: Literal["auto", "int8-graph", "int8", "float32", "numpy"] = Field(
        default="auto",
        description="the exact engine of wai-ops programs (paths/waiops/choose.py); auto: the "
        "fastest exact one for the program; a forced one that cannot take a program falls back",
    )
    report_retention_days: int = Field(
        default=30,
        ge=0,
        le=100_000,
        description="reports older than this many days are pruned (whole hours); 0 keeps them "
        "forever; the per-hour roll-ups are kept by rollup_retention_days",
    )
    rollup_retention_days: int = Field(
        default=0, ge=0, le=100_000, description="per-hour roll-ups kept; 0: forever"
    )
    prune_interval_s: float = Field(
        default=600.0, gt=0, le=86_400, description="how often the service prunes"
    )
    request_error_rows: int = Field(
        default=100,
        ge=0,
        le=100_000,
        description="request errors kept as rows per sink and "
        "hour (every one is counted; the rest are dropped and counted)",
    )
    token_refresh_s: float = Field(
        default=2.0, gt=0, le=300, description="a revoked token is refused within this bound"
    )
    token_snapshot_max_age_s: float = Field(
        default=3600.0,
        ge=0,
        le=7 * 86_400,
        description="a replica that cannot read the token store checks tokens against the "
        "snapshot on the spool volume when it is at most this old (else 503 token_store_down); "
        "0: no snapshot",
    )
    sets_refresh_s: float = Field(
        default=2.0,
        gt=0,
        le=300,
        description="every replica polls the set registry this often: a set installed or "
        "removed anywhere is seen within this bound (plus an installed set's fetch)",
    )
    bundled_sets: bool = Field(
        default=True,
        description="install the bundled demo sets into the set registry at start (one that "
        "was removed stays removed); off for a fleet",
    )
    admin_token_file: Path | None = Field(
        default=None,
        description="a file holding an admin token (a secret mounted into every replica): "
        "ensured in the token table at start; no admin-token file is written",
    )
    header_timeout_s: float = Field(
        default=10.0, gt=0, le=600, description="a request's headers arrive within this"
    )
    body_timeout_s: float = Field(
        default=30.0, gt=0, le=3600, description="a request's body arrives within this (408)"
    )
    keep_alive_s: int = Field(
        default=75,
        ge=1,
        le=600,
        description="idle keep-alive, seconds: longer than the clients' pools keep an idle "
        "connection (docs/operations.md, Keep-alive)",
    )
    http: Literal["auto", "httptools", "h11"] = Field(
        default="auto",
        description="the HTTP/1.1 parser `serve` runs on, both with the read deadlines and the "
        "head bound (service/http/edge.py): httptools (llhttp, in C) or h11 (pure Python); "
        "auto: httptools when it is installed, else h11",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="the event loop `serve` runs on: uvloop (libuv) or the standard library's "
        "asyncio; auto: uvloop when it is installed, else asyncio",
    )
    max_connections: int = Field(
        default=1000, ge=1, le=1_000_000, description="open connections; more: 503"
    )
    max_header_bytes: int = Field(default=16 * 1024, ge=1024, le=MiB)
    max_inflight_body_bytes: int = Field(
        default=256 * MiB, ge=MiB, description="request bodies being read at once; more: 429"
    )
    log_level: str = "INFO"
    page: bool = Field(
        default=True,
        description="serve the browser page at /page/ (public: it reads the installed sets' files)",
    )
    docs: bool = Field(
        default=False,
        description="serve Swagger UI at /docs (it loads its scripts from a CDN); /openapi.json "
        "is served either way",
    )
    token: str | None = Field(
        default=None, repr=False, description="bearer token of `decode --url` (the client)"
    )
    token_file: Path | None = Field(default=None, description="a file holding that token")

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        value = value.upper()
        if value not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("one of DEBUG, INFO, WARNING, ERROR")
        return value

    @field_validator("waiops_engine", mode="before")
    @classmethod
    def _waiops_engine(cls, value: Any) -> Any:
        return (value.strip().lower() or "auto") if isinstance(value, str) else value

    @field_validator("http", "event_loop", mode="before")
    @classmethod
    def _installed(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            value = value.strip().lower() or "auto"
            if value in ("httptools", "uvloop") and not installed(value):
                raise ValueError(
                    f"{value} is not installed (pip install {value}); "
                    f"auto runs on {_HTTP_FALLBACK if info.field_name == 'http' else 'asyncio'}"
                )
        return value

    @field_validator("replica_id")
    @classmethod
    def _replica_id(cls, value: str | None) -> str | None:
        if value is not None and not value.strip("."):
            raise ValueError("a folder name, not '.' or '..'")
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, value: Any) -> Any:
        if isinstance(value, str | os.PathLike):
            try:
                return check_data_dir(value)
            except DataDirInvalid as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("offer", mode="before")
    @classmethod
    def _offer(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):  # --offer A B: the same as "A,B"
            value = ",".join(str(v) for v in value)
        if isinstance(value, str):
            value = ",".join(part.strip() for part in value.split(",") if part.strip()) or None
            if value is not None:
                try:
                    parse_offer(value.split(","))
                except WaiError as exc:
                    raise ValueError(f"{exc.code}: {exc.message}") from None
        return value

    @field_validator("ort_threads", mode="before")
    @classmethod
    def _ort_threads(cls, value: Any) -> Any:
        if isinstance(value, str):  # a count of threads: digits only ("1.5", "٣" are not)
            text = value.strip()
            if not text:
                return None
            if not (text.isascii() and text.isdigit()):
                raise ValueError("a count of threads >= 1")
            return int(text)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @property
    def http_parser(self) -> Literal["httptools", "h11"]:
        """The HTTP/1.1 parser ``serve`` runs on: :attr:`http`, ``auto`` worked out."""
        if self.http != "auto":
            return self.http
        return "httptools" if installed("httptools") else _HTTP_FALLBACK

    @property
    def loop_impl(self) -> Literal["uvloop", "asyncio"]:
        """The event loop ``serve`` runs on: :attr:`event_loop`, ``auto`` worked out."""
        if self.event_loop != "auto":
            return self.event_loop
        return "uvloop" if installed("uvloop") else "asyncio"

    @property
    def decode_workers(self) -> int:
        return self.decode_threads or max(1, len(os.sched_getaffinity(0)))

    @property
    def spool_volume(self) -> Path:
        return self.spool_dir or self.data_dir / "spool"

    @property
    def url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'reports.db'}"

    def decoder_args(self, *, bundled: bool = True) -> DecoderArgs:
        """What a decoder takes of these settings (``Decoder.assemble(**…)``): its offer is
        ``None`` unless :attr:`offer` names one, so that the decoder's one rule
        (:func:`service.decoding.decoder.decoder_offer`) decides it; the bundled sets unless
        ``bundled`` or the ``bundled_sets`` setting is off."""
        return DecoderArgs(
            data_dir=self.data_dir,
            offer=parse_offer(self.offer.split(",")) if self.offer else None,
            bundled=bundled and self.bundled_sets,
            ort_threads=self.ort_threads,
            png_level=self.png_level,
            tile_bytes=self.tile_bytes,
            waiops_engine=self.waiops_engine,
        )

    def bearer(self) -> str | None:
        """The client's token: :attr:`token`, else the contents of :attr:`token_file`."""
        if self.token and self.token.strip():
            return self.token.strip()
        return self.token_file.read_text().strip() if self.token_file else None


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
            return Settings.model_validate(
                {**Settings.model_validate_json(handed).model_dump(), **given}
            )
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
