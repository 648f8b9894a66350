"""The error tree of wai-dispatch. Every error a client can cause carries a stable ``code``,
a member of a layer's :class:`dispatch.codes.ErrorCode` subclass (each layer declares its own in
its ``codes.py``; docs/errors.md lists them all).

    WaiError                 base: ``code`` (stable token) and a one-line message
    ├── UnknownToken         a token the vocabulary does not know (``unknown_token``)
    ├── InvalidReport        a report that is malformed or contradicts itself (``invalid_report``)
    ├── InvalidOffer         an offer that is malformed (``invalid_offer``)
    ├── UnknownCapability    a capability the registry does not hold (``unknown_capability``)
    ├── NoPath               no offered path ran any decode the envelope allows
    │                        (``decode_no_path``; service/, carries the reports)
    └── CodecError           bad input to the data layer (codec/errors.py: envelopes, payloads,
                             tables, sets and the store, each with codes of its own)

    BackendFailed            not a WaiError: what an adapter raises when its backend fails;
                             ``choose`` turns it into the §7 refusal ``dispatch_backend_failed``
                             with the backend's own exception kept as ``__cause__``
                             (dispatch/adapter.py)

The service answers every ``WaiError`` with its code's status (the HTTP layer's table,
service/http/statuses.py) and the code; the CLI prints it on one line and exits 2. A code must
be registered: defining a subclass with one that is not raises at import, and passing one as
``code=`` raises ``TypeError``, so an unregistered code never reaches a user.
"""

from __future__ import annotations

from typing import Any

from .codes import DispatchCode, is_code


class WaiError(Exception):
    """Base of every typed error. ``code`` is stable; the message is one line for a person."""

    code: str = DispatchCode.WAI_ERROR

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not is_code(cls.code):
            raise TypeError(f"{cls.__name__}.code {cls.code!r} is not a registered error code")

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            if not is_code(code):
                raise TypeError(f"code {code!r} is not a registered error code")
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class UnknownToken(WaiError, ValueError):
    code = DispatchCode.UNKNOWN_TOKEN


class InvalidReport(WaiError, ValueError):
    code = DispatchCode.INVALID_REPORT


class InvalidOffer(WaiError, ValueError):
    code = DispatchCode.INVALID_OFFER


class UnknownCapability(WaiError, LookupError):
    code = DispatchCode.UNKNOWN_CAPABILITY
