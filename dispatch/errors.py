"""The error tree of wai-dispatch. Every error a client can cause carries a stable ``code``.

    WaiError                 base: ``code`` (stable token) and a one-line message
    ├── UnknownToken         a token the vocabulary does not know (``unknown_token``)
    ├── InvalidReport        a report that is malformed or contradicts itself (``invalid_report``)
    ├── InvalidOffer         an offer that is malformed (``invalid_offer``)
    └── UnknownCapability    a capability the registry does not hold (``unknown_capability``)

Other packages (``codec``, ``paths``, ``service``) subclass :class:`WaiError` with codes of their
own; the service maps every ``WaiError`` to a 4xx answer carrying the code.
"""

from __future__ import annotations


class WaiError(Exception):
    """Base of every typed error. ``code`` is stable; the message is one line for a person."""

    code: str = "wai_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class UnknownToken(WaiError, ValueError):
    code = "unknown_token"


class InvalidReport(WaiError, ValueError):
    code = "invalid_report"


class InvalidOffer(WaiError, ValueError):
    code = "invalid_offer"


class UnknownCapability(WaiError, LookupError):
    code = "unknown_capability"
