"""The one configuration's model: every ``WAI_…`` knob of the CLI, the tools and the service as
a field of :class:`Settings`, with its default, its check and what is derived from it, and
:class:`SettingsInvalid`, the error naming every bad value. :mod:`service.decoding.settings`
loads it (flags over the environment over the ``WAI_CONFIG`` file over the defaults); this
module reads no ``WAI_*`` variable itself (pydantic-settings does, for the fields)."""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from wai_dispatch.codec.layout import DEFAULT_PNG_LEVEL, DataDirInvalid, check_data_dir
from wai_dispatch.dispatch.errors import InvalidInput, WaiError
from wai_dispatch.dispatch.offer import REFERENCE_OFFER, Offer, parse_offer

MiB = 1024 * 1024

PREFIX = "WAI_"

# The TOML file :func:`load` checked, for the sources of the Settings it builds.
_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "wai_config_file", default=None
)


class SettingsInvalid(InvalidInput):
    """a setting (environment, WAI_CONFIG file or flag) that does not validate"""

    code = "settings_invalid"

    def __init__(self, problems: str | Iterable[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


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
    def decode_workers(self) -> int:
        return self.decode_threads or max(1, len(os.sched_getaffinity(0)))

    @property
    def spool_volume(self) -> Path:
        return self.spool_dir or self.data_dir / "spool"

    @property
    def url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'reports.db'}"

    @property
    def offer_paths(self) -> Offer:
        """The offer: :attr:`offer`'s paths in order, else the reference offer (§4, §6.1)."""
        return parse_offer(self.offer.split(",")) if self.offer else REFERENCE_OFFER

    def bearer(self) -> str | None:
        """The client's token: :attr:`token`, else the contents of :attr:`token_file`."""
        if self.token and self.token.strip():
            return self.token.strip()
        return self.token_file.read_text().strip() if self.token_file else None
