"""Text at the edge: the one check every route's query and path parameters pass before a route
reads them (an application-wide FastAPI dependency, :func:`checked_text`), so that a request
gets the same answer whatever store is behind the service (PostgreSQL refuses a NUL in text
that SQLite keeps).

A parameter's name or value is refused with 422 ``request_invalid`` naming the parameter when it
holds a control character (Unicode category Cc: C0, DEL, C1), a lone surrogate (which is also
what bytes that are not UTF-8 become here: percent-escapes are decoded with
``surrogateescape``, never silently replaced), or more than :data:`MAX_TEXT` characters.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

from fastapi import Request

from wai_dispatch.service.http.errors import RequestInvalid, ServiceError

__all__ = ["MAX_TEXT", "checked_text", "text_problem"]

#: The longest query or path parameter value (or name) the service reads, in characters; a
#: route's own ``max_length`` is tighter.
MAX_TEXT = 1024
_BAD = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """What is wrong with ``value`` as text a store keeps, or ``None``."""
    if len(value) > MAX_TEXT:
        return f"longer than {MAX_TEXT} characters"
    found = _BAD.search(value)
    if found is None:
        return None
    point = ord(found.group())
    if 0xD800 <= point <= 0xDFFF:
        return "bytes that are not UTF-8 text (or a lone surrogate)"
    return f"a control character (U+{point:04X})"


def _shown(name: str) -> str:
    """A parameter's name as a message can show it: escaped, at most 64 characters."""
    return ascii(name[:64])[1:-1]


def _refuse(where: str, problem: str) -> ServiceError:
    return RequestInvalid(f"{where}: {problem}")


async def checked_text(request: Request) -> None:
    """The application's first dependency: every path parameter, and every query parameter's
    name and value (declared by the route or not), is text a store can keep (``async``: a
    check of the request's own text, made on the event loop rather than in a thread)."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and (problem := text_problem(value)) is not None:
            raise _refuse(f"path.{name}", problem)
    # the path parameters were decoded with U+FFFD for bytes that are not UTF-8: the raw
    # path says whether there were any
    raw_path = request.scope.get("raw_path")
    if isinstance(raw_path, bytes) and b"%" in raw_path:
        decoded = unquote(raw_path.decode("latin-1"), errors="surrogateescape")
        if _SURROGATE.search(decoded) is not None:
            raise _refuse("path", "bytes that are not UTF-8 text (or a lone surrogate)")
    query = request.scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True, errors="surrogateescape"):
        if (problem := text_problem(name)) is not None:
            raise _refuse(f"query name '{_shown(name)}'", problem)
        if (problem := text_problem(value)) is not None:
            raise _refuse(f"query.{_shown(name)}", problem)
