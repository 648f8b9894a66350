"""Error codes: the base every layer's codes derive from, and the pure core's own.

Each layer declares the codes it raises beside its code, in its ``codes.py`` (``codec.codes``,
``paths.codes``, ``service.store.codes``, …), as a :class:`ErrorCode` subclass whose members are
a stable string and a one-line meaning. The HTTP status of each code is the HTTP layer's
(``service/http/statuses.py``); this core knows nothing of HTTP. ``tools/error_registry.py``
assembles every layer's codes into the one registry that ``docs/errors.md`` is generated from
and the tests check (each code once, documented, with a status).

These are *errors* (a client's or user's mistake, or a decode that cannot happen), distinct
from the seven §7 refusal codes (:class:`dispatch.tokens.Code`), which are reasons inside a
report. No error code starts with ``dispatch_``: a dashboard that counts the spec's refusal
codes must never count an error among them.
"""

from __future__ import annotations

import enum

__all__ = ["DispatchCode", "ErrorCode", "code_of", "is_code", "loaded_codes"]


class ErrorCode(enum.StrEnum):
    """The base of every layer's codes (it has no members of its own): ``code.meaning`` says
    what a code means in one line. A code is a ``str``: it compares equal to its string."""

    meaning: str

    def __new__(cls, value: str, meaning: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member


class DispatchCode(ErrorCode):
    """The codes of the pure core: the error tree's base, tokens, offers, reports and the
    capability registry."""

    WAI_ERROR = "wai_error", "an error with no more specific code"
    UNKNOWN_TOKEN = (
        "unknown_token",
        "a unit, backend, arithmetic, tier or code token the vocabulary does not know",
    )
    INVALID_OFFER = (
        "invalid_offer",
        "an offer that is empty, repeats a path, or names a path that is not "
        "unit/backend/arithmetic or that §1's backend table rules out (an integer path on npu "
        "among them); a conformance vector's scripted answer that does not read",
    )
    INVALID_REPORT = (
        "invalid_report",
        "a report that is malformed or contradicts §2–§5 (the message says which rule)",
    )
    UNKNOWN_CAPABILITY = "unknown_capability", "a capability the registry does not hold"


def _layers(base: type[ErrorCode] = ErrorCode) -> list[type[ErrorCode]]:
    found: list[type[ErrorCode]] = []
    for sub in base.__subclasses__():
        found += [sub, *_layers(sub)]
    return found


def loaded_codes() -> list[ErrorCode]:
    """Every code of the layers imported so far (the whole registry is
    ``tools/error_registry.py``'s, which imports every layer's ``codes.py``)."""
    return [code for layer in _layers() for code in layer]


def code_of(value: str) -> ErrorCode | None:
    """The code whose string is ``value``, among the layers imported so far; else ``None``."""
    if isinstance(value, ErrorCode):
        return value
    for layer in _layers():
        member = layer._value2member_map_.get(value)
        if isinstance(member, ErrorCode):
            return member
    return None


def is_code(value: str) -> bool:
    """Whether ``value`` is a code a layer registers (a member of an :class:`ErrorCode`
    subclass; a layer's codes register as its ``codes.py`` is imported, which every module
    that raises one does)."""
    return code_of(value) is not None
