"""JSON as the data layer reads it from outside: a duplicate key or a NaN/Infinity constant is
an error, not a silent last-one-wins or a non-number."""

from __future__ import annotations

import json
from typing import Any


class StrictJSONError(ValueError):
    """Valid to Python's parser, but not JSON we accept (the message says why)."""


def loads(text: str) -> Any:
    """``json.loads`` refusing duplicate keys and the constants NaN and ±Infinity. Other
    syntax errors raise ``json.JSONDecodeError`` (a ``ValueError``) as usual."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError(f"duplicate key {key[:40]!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON number")
