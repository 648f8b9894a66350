"""The error tree of wai-dispatch: the kinds, and the pure core's own errors.

Every error a user or a client can cause is a :class:`WaiError` of one *kind*. A kind says what
went wrong in terms any door understands (the HTTP service answers each kind with its status,
the CLI exits with its status: docs/errors.md); a layer's error subclasses one kind and names a
stable ``code`` (a string that never changes meaning) with its one-line meaning as the class's
docstring. A code lives in that one class: adding a code is adding a class in its own layer.
This core knows no HTTP status and no exit status::

    WaiError                 base: ``code`` and a one-line message
    ├── InvalidInput         the request, its input or an argument does not hold
    │   └── Malformed        the input does not even read (not JSON, not CBOR, a bad query)
    ├── TooLarge             over a limit, refused before the work
    ├── NotFound             no such thing here
    ├── Forbidden            the caller may not do this
    ├── Conflict             the state does not allow it (now): another body, not unique
    ├── Busy                 the capacity is taken: retry after ``retry_after_s``
    ├── Unavailable          what the answer needs does not answer: retry after ``retry_after_s``
    └── Internal             a fault of ours, never the caller's

    BackendFailed            not a WaiError: what an adapter raises when its backend fails;
                             ``choose`` turns it into the §7 refusal ``dispatch_backend_failed``
                             (dispatch/adapter.py)

These are errors, distinct from the seven §7 refusal codes (:class:`dispatch.tokens.Code`),
which are reasons inside a report: no error code starts with ``dispatch_``.
"""

from __future__ import annotations


class WaiError(Exception):
    """an error with no more specific code"""

    code = "wai_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class InvalidInput(WaiError, ValueError):
    """The kind: the request, its input or an argument does not hold."""


class Malformed(InvalidInput):
    """The kind: input that does not even read."""


class TooLarge(WaiError, ValueError):
    """The kind: over a limit, refused before the work."""


class NotFound(WaiError, LookupError):
    """The kind: no such thing here."""


class Forbidden(WaiError):
    """The kind: the caller may not do this."""


class Conflict(WaiError):
    """The kind: the state does not allow it (another body under one id, several that fit)."""


class _Retry(WaiError):
    """A kind the caller may retry: after ``retry_after_s`` (``None``: no hint)."""

    retry_after_s: int | None = None

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s


class Busy(_Retry):
    """The kind: the capacity is taken."""


class Unavailable(_Retry):
    """The kind: what the answer needs (a store, a registry, a cluster) does not answer."""


class Internal(WaiError):
    """The kind: a fault of ours, never the caller's."""


#: The kinds (a handful: what went wrong, in terms any door understands).
KINDS = (
    InvalidInput,
    Malformed,
    TooLarge,
    NotFound,
    Forbidden,
    Conflict,
    Busy,
    Unavailable,
    Internal,
)


def kind_of(error: type[WaiError]) -> type[WaiError]:
    """The kind of an error class: its first kind in method-resolution order (the order in which
    Starlette looks up an exception's handler), else ``WaiError``."""
    return next((c for c in error.__mro__ if c in KINDS), WaiError)


def is_code(value: str) -> bool:
    """Whether ``value`` is the ``code`` of an error class loaded in this process (a layer's
    errors load with the modules that raise them)."""
    found: list[type[WaiError]] = [WaiError]
    while found:
        error = found.pop()
        if error.__dict__.get("code") == value:
            return True
        found += error.__subclasses__()
    return False


class UnknownToken(InvalidInput):
    """a unit, backend, arithmetic, tier or code token the vocabulary does not know"""

    code = "unknown_token"


class InvalidOffer(InvalidInput):
    """an offer that is empty, repeats a path, or names a path that is not unit/backend/arithmetic
    or that §1's backend table rules out (an integer path on npu among them); a conformance
    vector's scripted answer that does not read"""

    code = "invalid_offer"


class InvalidReport(InvalidInput):
    """a report that is malformed or contradicts §2–§5 (the message says which rule)"""

    code = "invalid_report"


class UnknownCapability(InvalidInput, LookupError):
    """a capability the registry does not hold"""

    code = "unknown_capability"


class InvalidArgument(InvalidInput):
    """a command-line argument or a function's argument that is malformed (a latent shape, a
    path), or a command line argparse refuses (no command, an unknown flag, a missing value;
    the usage follows on later lines)"""

    code = "invalid_argument"
