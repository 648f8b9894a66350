"""The one registry of error codes, assembled from every layer's ``codes.py`` with the HTTP
status the HTTP layer assigns each (service/http/statuses.py): what docs/errors.md is generated
from (``python -m wai_dispatch.tools.errors_doc``) and what the tests check (each code declared
once, documented, with a status).

The layers declare their codes beside their code and know nothing of the others; this module,
beside the CLI at the top, is the one place that lists them all. It imports the codes modules of
the HTTP service, the page and the Ray deployment, which import nothing but ``dispatch.codes``
(tests/project/test_architecture.py holds them to that), and no module of those layers besides.
"""

from __future__ import annotations

from dataclasses import dataclass

from wai_dispatch.cli.codes import CliCode
from wai_dispatch.codec.codes import CodecCode
from wai_dispatch.dispatch.codes import DispatchCode, ErrorCode
from wai_dispatch.paths.codes import PathsCode
from wai_dispatch.service.decoding.codes import DecodingCode
from wai_dispatch.service.governance.codes import GovernanceCode
from wai_dispatch.service.http.codes import HttpCode
from wai_dispatch.service.http.statuses import STATUS
from wai_dispatch.service.rayserve.codes import RayCode
from wai_dispatch.service.store.codes import StoreCode
from wai_dispatch.service.web.codes import PageCode
from wai_dispatch.tools.codes import ToolsCode

__all__ = ["LAYERS", "Entry", "Layer", "codes", "entries", "is_registered"]


@dataclass(frozen=True)
class Layer:
    """A layer's codes: the layer (its package, as docs/architecture.md names it) and its
    ``codes.py``."""

    name: str
    module: str
    codes: type[ErrorCode]


#: Every layer's codes, bottom up (docs/architecture.md's order).
LAYERS: tuple[Layer, ...] = (
    Layer("dispatch", "dispatch/codes.py", DispatchCode),
    Layer("codec", "codec/codes.py", CodecCode),
    Layer("paths", "paths/codes.py", PathsCode),
    Layer("service.decoding", "service/decoding/codes.py", DecodingCode),
    Layer("service.governance", "service/governance/codes.py", GovernanceCode),
    Layer("service.store", "service/store/codes.py", StoreCode),
    Layer("service.http", "service/http/codes.py", HttpCode),
    Layer("service.web", "service/web/codes.py", PageCode),
    Layer("service.rayserve", "service/rayserve/codes.py", RayCode),
    Layer("cli", "cli/codes.py", CliCode),
    Layer("tools", "tools/codes.py", ToolsCode),
)


@dataclass(frozen=True)
class Entry:
    """One registered code: the layer that declares it and its HTTP status (``None`` where
    the HTTP layer assigns none: a test refuses that)."""

    code: ErrorCode
    layer: Layer

    @property
    def status(self) -> int | None:
        return STATUS.get(self.code.value)


def entries() -> list[Entry]:
    """Every code of every layer, layer by layer, each in its declaration order."""
    return [Entry(code, layer) for layer in LAYERS for code in layer.codes]


def codes() -> list[ErrorCode]:
    return [entry.code for entry in entries()]


def is_registered(value: str) -> bool:
    """Whether ``value`` is a code some layer declares."""
    return value in {code.value for code in codes()}
