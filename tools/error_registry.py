"""The one registry of error codes: every error class that names a ``code`` of its own, with its
kind, its HTTP status (codes that reach the service), its exit status and its meaning (the
class's docstring). What docs/errors.md is generated from (``python -m
wai_dispatch.tools.errors_doc``) and what the tests check (each code declared by one class).

A code lives in its class, in its own layer; this module, beside the CLI at the top, only
imports the modules that declare error classes (:data:`MODULES`) and walks the tree of
:class:`dispatch.errors.WaiError` (and :class:`cli.remote.ClientError`, the sink client's own
tree, which loads nothing of ours: its codes carry an exit status and no kind).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from wai_dispatch.cli.remote import ClientError
from wai_dispatch.cli.run import exit_status
from wai_dispatch.dispatch.errors import WaiError, kind_of
from wai_dispatch.service.http.errors import status_of

#: The modules that declare error classes, layer by layer, bottom up (docs/architecture.md's
#: order; a test holds this list to every class in the source that names a code).
MODULES: tuple[str, ...] = (
    "dispatch.errors",
    "codec.errors",
    "codec.envelope",
    "codec.tables",
    "codec.compressai_rans",
    "codec.sets.errors",
    "codec.layout",
    "codec.files",
    "codec.picture_read",
    "paths.waiops.errors",
    "service.decoding.results",
    "service.decoding.errors",
    "service.decoding.compressai",
    "service.governance.errors",
    "service.store.errors",
    "service.store.spool",
    "service.store.bearer",
    "service.http.errors",
    "service.web.errors",
    "service.rayserve.plan",
    "cli.errors",
    "cli.remote",
    "tools.errors",
)
#: The layers whose codes never reach the HTTP service (they carry no status).
LOCAL = ("cli", "tools")


def layer_of(module: str) -> str:
    """The layer of a module (``wai_dispatch.service.store.bearer``: ``service.store``)."""
    parts = module.removeprefix("wai_dispatch.").split(".")
    return ".".join(parts[:2] if parts[0] == "service" else parts[:1])


LAYERS: tuple[str, ...] = tuple(dict.fromkeys(layer_of(m) for m in MODULES))


@dataclass(frozen=True)
class Entry:
    """One code: the class that declares it, its layer, kind, statuses and meaning."""

    code: str
    error: type[WaiError] | type[ClientError]

    @property
    def module(self) -> str:
        return _module(self.error)

    @property
    def layer(self) -> str:
        return layer_of(self.module)

    @property
    def kind(self) -> str | None:
        """The kind's class name (``None``: a ``--url`` call's error, outside the tree)."""
        return kind_of(self.error).__name__ if issubclass(self.error, WaiError) else None

    @property
    def status(self) -> int | None:
        """The HTTP status (``None``: the code never reaches the HTTP service)."""
        if self.layer in LOCAL or not issubclass(self.error, WaiError):
            return None
        return status_of(self.error)

    @property
    def exit(self) -> int:
        if issubclass(self.error, WaiError):
            return exit_status(self.error)
        return self.error.exit_status

    @property
    def meaning(self) -> str:
        return " ".join((self.error.__doc__ or "").split())


def _tree(base: type) -> list[type]:
    found: list[type] = []
    sub: type
    for sub in base.__subclasses__():
        found += [sub, *_tree(sub)]
    return found


def entries() -> list[Entry]:
    """Every code, module by module in :data:`MODULES`' order, each in declaration order."""
    names = {m: list(vars(importlib.import_module(f"wai_dispatch.{m}"))) for m in MODULES}
    classes = [WaiError, *_tree(WaiError), *_tree(ClientError)]
    # a class outside MODULES (a test's throwaway error) is no code of the project's
    named = [c for c in dict.fromkeys(classes) if "code" in vars(c) and _module(c) in names]

    def place(error: type) -> tuple[int, int]:
        return MODULES.index(_module(error)), names[_module(error)].index(error.__name__)

    return [Entry(c.__dict__["code"], c) for c in sorted(named, key=place)]


def _module(error: type) -> str:
    return error.__module__.removeprefix("wai_dispatch.")


def codes() -> list[str]:
    return [entry.code for entry in entries()]


def status(code: str) -> int | None:
    """The HTTP status of ``code`` (``None``: it never reaches the service); a ``ValueError``
    for a string no class declares."""
    found = [entry.status for entry in entries() if entry.code == code]
    if not found:
        raise ValueError(f"{code!r} is not a registered error code")
    return found[0]


def is_registered(value: str) -> bool:
    """Whether ``value`` is a code some class declares."""
    return value in set(codes())
