"""The one JSON reader for everything wai-dispatch reads from outside (envelopes, reports, run
reports, policies, manifests, tables, programs, query parameters): bounded and strict.

Refused, each with a :class:`StrictJSONError` (a ``ValueError``) that says why:

- bytes that are not UTF-8 (UTF-16/32, a byte-order mark, invalid sequences), and strings
  holding a lone surrogate (``"\\ud800"``), which no UTF-8 writer can store later;
- a duplicate key (never a silent last-one-wins);
- the constants ``NaN``, ``Infinity`` and ``-Infinity``, and a float that overflows to ±inf;
- an integer of more than :data:`MAX_INT_DIGITS` digits (nothing we store is wider than 64 bits;
  a 5,000-digit number is refused before Python converts it);
- nesting deeper than :data:`MAX_DEPTH`, checked before the parser
  recurses, so a 100,000-deep body never reaches Python's recursion limit;
- a text longer than ``max_bytes`` when given.

Other syntax errors raise ``json.JSONDecodeError`` (a ``ValueError``) as usual. Standard library
only: the pure core uses it too (dispatch/report.py).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: Nesting allowed by default: every document we define is far shallower.
MAX_DEPTH = 64
#: Digits an integer may have (its sign aside): uint64's largest has 20.
MAX_INT_DIGITS = 20

#: A string literal (with escapes) or a bracket: what the depth scan looks at.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class StrictJSONError(ValueError):
    """Valid to Python's parser, or too large for ours, but not JSON we accept."""


def loads(
    data: str | bytes | bytearray | memoryview,
    *,
    max_bytes: int | None = None,
) -> Any:
    """Parse ``data`` as strict JSON (see the module's list of what is refused)."""
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
        text = data
    else:
        raw = bytes(data)
        if raw.startswith(b"\xef\xbb\xbf"):
            raise StrictJSONError("a UTF-8 byte-order mark: JSON text starts without one")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(f"not UTF-8 (byte {exc.start})") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise StrictJSONError(f"{len(raw)} bytes, over the limit of {max_bytes}")
    _check_depth(raw)
    value = json.loads(
        text,
        object_pairs_hook=_no_duplicates,
        parse_constant=_no_constant,
        parse_int=_bounded_int,
        parse_float=_finite_float,
    )
    if isinstance(data, str) or b"\\u" in raw:  # only an escape can make a surrogate from UTF-8
        _check_strings(value)
    return value


def _check_depth(raw: bytes) -> None:
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return  # too few brackets to nest that deep (the common case: one C pass)
    depth = 0
    for match in _TOKENS.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise StrictJSONError(f"nested deeper than {MAX_DEPTH}")
        elif token in (b"]", b"}"):
            depth -= 1


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError(f"duplicate key {key[:40]!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise StrictJSONError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"{text[:40]} overflows a double")
    return value


def _check_strings(value: Any) -> None:
    """Refuse a lone surrogate in any key or string, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise StrictJSONError(
                    "a string holds a lone surrogate (not Unicode text)"
                ) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
