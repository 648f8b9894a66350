"""Keyset paging for the lists that are not paged by a column of their own (the request errors,
the fleet tables): a page starts *after* a position, never at an offset, so reading page 1,000
costs what page 1 does. A position is a short list of ints and strings (the sort value and the
row's key), sent as an opaque cursor: base64url of its JSON, tagged with the list (and sort) it
belongs to. Every list reads its cursors here, each part checked against the type the list's
sort gives it (an int within a BIGINT, a string, a number, or none where named): anything else
is :class:`~service.store.errors.CursorInvalid`, never a comparison that fails later."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from wai_dispatch.dispatch import strictjson
from wai_dispatch.service.store.errors import CursorInvalid

__all__ = ["INT", "NUMBER", "STR", "Position", "decode", "encode"]

Position = list[int | float | str | None]
BIGINT = range(-(2**63), 2**63)
INT: tuple[type, ...] = (int,)
STR: tuple[type, ...] = (str,)
NUMBER: tuple[type, ...] = (int, float)


def encode(tag: str, position: Sequence[Any]) -> str:
    text = json.dumps([tag, *position], separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode(tag: str, cursor: str, kinds: Sequence[tuple[type, ...]]) -> Position:
    """The position in ``cursor``, each part one of its ``kinds`` (``type(None)`` allowed where
    named), for the list ``tag``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        got = strictjson.loads(raw, max_bytes=4096)
    except (binascii.Error, ValueError, strictjson.StrictJSONError):
        got = None
    ok = isinstance(got, list) and len(got) == len(kinds) + 1 and got[0] == tag
    if ok:
        for part, allowed in zip(got[1:], kinds, strict=True):
            if (
                isinstance(part, bool)
                or not isinstance(part, allowed)
                or (isinstance(part, int) and part not in BIGINT)
            ):
                ok = False
    if not ok:
        raise CursorInvalid("the cursor is not one this service gave")
    return list(got[1:])
