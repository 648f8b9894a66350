"""The service's configuration: environment variables (``WAI_…``) over an optional TOML file
(``WAI_CONFIG``), validated once at start; a bad value stops the start with one clear line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from wai_dispatch.codec.config import data_dir as default_data_dir
from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.dispatch.errors import WaiError

MiB = 1024 * 1024


class SettingsInvalid(WaiError, ValueError):
    code = ErrorCode.SETTINGS_INVALID


class Settings(BaseSettings):
    """Every knob of ``wai-dispatch serve``; each is ``WAI_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="WAI_", extra="forbid", frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir, description="sets, store, spool")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default sqlite:///<data_dir>/reports.db"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    offer: str | None = Field(default=None, description="paths in order, comma-separated")
    decode_threads: int = Field(default=0, ge=0, le=64, description="decode threads; 0: CPUs")
    queue: int = Field(default=8, ge=0, le=10_000, description="decodes waiting beyond threads")
    decode_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    max_body_bytes: int = Field(default=16 * MiB, ge=1024)
    max_latent_elements: int = Field(default=192 * 64 * 64, ge=1, description="C×H×W, header")
    memory_budget_bytes: int = Field(default=1536 * MiB, ge=64 * MiB)
    spool_max_bytes: int = Field(default=256 * MiB, ge=MiB)
    program_cache_bytes: int = Field(default=512 * MiB, ge=MiB)
    ort_threads: int | None = Field(default=None, ge=1, le=256)
    log_level: str = "INFO"
    page: bool = Field(
        default=True,
        description="serve the browser page at /page/ (public: it reads the installed sets' files)",
    )

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        value = value.upper()
        if value not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("one of DEBUG, INFO, WARNING, ERROR")
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
        path = os.environ.get("WAI_CONFIG")
        if path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(path)))
        return tuple(sources)

    @property
    def decode_workers(self) -> int:
        return self.decode_threads or max(1, len(os.sched_getaffinity(0)))

    @property
    def url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'reports.db'}"


def load(**overrides: Any) -> Settings:
    """The settings from ``overrides``, the environment and ``WAI_CONFIG``; a bad value raises
    :class:`SettingsInvalid` naming the setting."""
    path = os.environ.get("WAI_CONFIG")
    if path and not Path(path).is_file():
        raise SettingsInvalid(f"WAI_CONFIG names {path}, which is not a file")
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise SettingsInvalid(f"setting {where}: {first['msg']}") from None
    except Exception as exc:  # a config file that is not TOML
        raise SettingsInvalid(f"configuration: {exc}") from None
