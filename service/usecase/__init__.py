"""The service's use cases, below HTTP: what a request asks of the decoding library and the
report store, as one typed operation each (``decode.py``: an envelope's bytes in, a typed
outcome out, its reports recorded). The HTTP routes, the CLI and the Ray replicas call them;
they import no web framework.

Face: ``decode_here`` (the CLI's decode, in this thread), its ``DecodeRequest`` (from a body:
``local_request``), and the ``Outcome``: ``Decoded``, ``NoPathFound`` or ``Refused``. The
service's (admitted, in the decode pool) is ``decode.decode``: a face name never shadows a
module."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.service.usecase.decode import (
        Decoded,
        DecodeRequest,
        NoPathFound,
        Outcome,
        Refused,
        decode_here,
        local_request,
    )

__all__ = [
    "DecodeRequest",
    "Decoded",
    "NoPathFound",
    "Outcome",
    "Refused",
    "decode_here",
    "local_request",
]

#: The face: each name, and the module of this package that defines it (``module:name`` where
#: the face names it otherwise), imported on first use (PEP 562): importing the package, as
#: every import of one of its modules does, loads none of them.
_FACE = {
    "DecodeRequest": "decode",
    "Decoded": "decode",
    "NoPathFound": "decode",
    "Outcome": "decode",
    "Refused": "decode",
    "decode_here": "decode",
    "local_request": "decode",
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
