"""The decoding library every caller shares — the CLI, the tools and the HTTP service:
:class:`.decoder.Decoder` (opens the set store once, decodes, plans, verifies, imports), its
results (:mod:`.results`), the placement plan (:mod:`.plan`), §6.4 agreement (:mod:`.verify`),
the CompressAI import (:mod:`.compressai`) and the one :class:`.settings.Settings`.

Face: ``Decoder``, its results (``DecodeResult``, ``PlanResult``, ``VerifyResult``; ``NoPath``
when no path decodes), ``Settings`` read by ``load_settings`` (``SettingsInvalid``). Each is
imported on first use, so that reading the settings (every command does) does not load the
decoder, and the sink's client (``decode --url``) loads neither. It imports no web framework
and no database (tests/project/test_architecture.py)."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.decoding.results import DecodeResult, NoPath, PlanResult, VerifyResult
    from wai_dispatch.service.decoding.settings import (
        Settings,
        SettingsInvalid,
    )
    from wai_dispatch.service.decoding.settings import (
        load as load_settings,
    )

__all__ = [
    "DecodeResult",
    "Decoder",
    "NoPath",
    "PlanResult",
    "Settings",
    "SettingsInvalid",
    "VerifyResult",
    "load_settings",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "DecodeResult": "results",
    "Decoder": "decoder",
    "NoPath": "results",
    "PlanResult": "results",
    "Settings": "settings",
    "SettingsInvalid": "settings",
    "VerifyResult": "results",
    "load_settings": "settings:load",
}


def __getattr__(name: str) -> object:
    """A name of the face, imported from its module on first use."""
    where = _FACE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = where.partition(":")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
