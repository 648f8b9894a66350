"""Reading an envelope: the JSON and CBOR forms of ``wai-envelope/1`` parsed into
:class:`codec.envelope.Envelope`, within the limits, and every bad input translated into a typed
:class:`codec.envelope.EnvelopeError` (docs/envelope.md)."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

import cbor2
from pydantic import ValidationError

from wai_dispatch.codec.envelope import (
    _BIGNUM,
    _BOM,
    _CUSTOM,
    _DEFAULT_LIMITS,
    _INT_MAX,
    _INT_MIN,
    _MAX_DEPTH,
    FORMAT,
    Envelope,
    EnvelopeError,
    EnvelopeFormat,
    EnvelopeMalformed,
    EnvelopeTooLarge,
)
from wai_dispatch.dispatch import strictjson
from wai_dispatch.setfacts.limits import Limits


def parse(data: bytes, *, limits: Limits = _DEFAULT_LIMITS) -> Envelope:
    """Either form: JSON when the first non-whitespace byte is ``{`` or ``[``, else CBOR (a
    CBOR envelope starts with a map or tag 55799, never with either). A file that is empty or
    only whitespace, or starts with a UTF-8 byte-order mark, is refused as what it is."""
    _check_size(len(data), limits)
    if data.startswith(_BOM):
        raise EnvelopeMalformed(
            "not JSON: the file starts with a UTF-8 byte-order mark; JSON is read without one "
            "(RFC 8259 §8.1)"
        )
    first = bytes(data).lstrip(b" \t\r\n")[:1]
    if not first:
        raise EnvelopeMalformed("empty: the file holds no envelope (nothing but whitespace)")
    if first in (b"{", b"["):
        return parse_json(data, limits=limits)
    return parse_cbor(data, limits=limits)


def parse_json(data: bytes | str, *, limits: Limits = _DEFAULT_LIMITS) -> Envelope:
    """The JSON form (payloads as base64). Duplicate keys, NaN and trailing data are malformed."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    _check_size(len(raw), limits)
    try:
        text = raw.decode("utf-8")
        obj = strictjson.loads(text)
    except strictjson.StrictJSONError as exc:
        raise EnvelopeMalformed(f"not JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, int size
        raise EnvelopeMalformed(f"not JSON: {_one_line(exc)}") from None
    return _validate(obj, "json", limits)


#: Files a decode is given by mistake, by their signature: named, not parsed as CBOR.
_NOT_ENVELOPES = (
    (b"\x89PNG\r\n\x1a\n", "a PNG picture"),
    (b"\xff\xd8\xff", "a JPEG picture"),
    (b"GIF8", "a GIF picture"),
    (b"\x1f\x8b", "a gzip file"),
    (b"PK\x03\x04", "a zip file"),
)


def _mistaken(raw: bytes) -> None:
    for signature, what in _NOT_ENVELOPES:
        if raw.startswith(signature):
            raise EnvelopeMalformed(
                f"{what}, not an envelope (JSON or CBOR): decode reads envelopes; encode makes "
                "one from a picture"
            )


def parse_cbor(data: bytes, *, limits: Limits = _DEFAULT_LIMITS) -> Envelope:
    """The CBOR form (RFC 8949; payloads as byte strings). One data item, nothing after it."""
    raw = bytes(data)
    _check_size(len(raw), limits)
    _mistaken(raw)
    stream = io.BytesIO(raw)
    try:
        decoder = cbor2.CBORDecoder(
            stream,
            max_depth=_MAX_DEPTH + 8,
            allow_duplicate_keys=False,
            strict_hashable_types=True,
        )
        obj = decoder.decode()
    except Exception as exc:  # the boundary: cbor2 raises its own errors and, from tags, others
        raise EnvelopeMalformed(f"not CBOR: {_one_line(exc)}") from None
    if stream.tell() != len(raw):
        raise EnvelopeMalformed(f"not CBOR: {len(raw) - stream.tell()} bytes after the envelope")
    return _validate(_plain_cbor(obj, [len(raw)]), "cbor", limits)


def _plain_cbor(
    value: Any, budget: list[int], depth: int = 0, path: frozenset[int] = frozenset()
) -> Any:
    """The decoded item as plain values: a frozen map (tag 55799 gives one) as a dict, a map
    key that is not text refused (the JSON form has no other), an integer outside CBOR's
    64-bit ones (a bignum) refused; other values as decoded, for the models to refuse.

    Shared references (tags 28/29) are followed once per use: one that holds itself is a
    cycle, and uses that expand past ``budget`` items (the bytes read: without references,
    every item takes at least one) are refused, so a small file cannot expand without bound.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise EnvelopeTooLarge("not a wai-envelope/1 CBOR form: shared references expand it")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise EnvelopeError(_BIGNUM)
        return value
    if not isinstance(value, Mapping | list | tuple):
        return value
    if id(value) in path:
        raise EnvelopeMalformed("not a wai-envelope/1 CBOR form: shared references make a cycle")
    if depth > _MAX_DEPTH + 8:
        raise EnvelopeMalformed("not a wai-envelope/1 CBOR form: nested too deep")
    inner = path | {id(value)}
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise EnvelopeMalformed("not a wai-envelope/1 CBOR form: a map key is not text")
        return {k: _plain_cbor(v, budget, depth + 1, inner) for k, v in value.items()}
    return [_plain_cbor(v, budget, depth + 1, inner) for v in value]


def _check_size(size: int, limits: Limits) -> None:
    if size > limits.max_envelope_bytes:
        raise EnvelopeTooLarge(
            f"envelope of {size} bytes over the limit of {limits.max_envelope_bytes}"
        )


def _validate(obj: Any, form: str, limits: Limits) -> Envelope:
    if not isinstance(obj, dict):
        raise EnvelopeError(f"an envelope is an object, not {_kind(obj)}")
    if "format" not in obj:
        raise EnvelopeError("format: missing (expected 'wai-envelope/1')")
    if obj["format"] != FORMAT:
        shown = _safe_repr(obj["format"])
        raise EnvelopeFormat(f"format: {shown} is not supported (expected 'wai-envelope/1')")
    try:
        return Envelope.model_validate(obj, context={"form": form, "limits": limits})
    except ValidationError as exc:
        raise _translate(exc) from None


def _translate(exc: ValidationError) -> EnvelopeError:
    """The first error, with its location, as a typed error (pydantic's never leaks)."""
    err = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(_show(p) for p in err["loc"]) or "envelope"
    cls = _CUSTOM.get(err["type"], EnvelopeError)
    if err["type"] == "extra_forbidden":
        return cls(f"{where}: not a member of wai-envelope/1")
    if err["type"] == "missing":
        return cls(f"{where}: missing")
    if err["type"] == "string_pattern_mismatch" and err["loc"][-1] == "set":
        return cls(f"{where}: not a BLAKE3 digest (64 lowercase hex digits)")
    if err["type"] == "string_type":
        return cls(f"{where}: is a string")
    return cls(f"{where}: {_one_line(err['msg'])}")


def _show(part: str | int) -> str:
    """A location part as it can be printed on one line: a member name read from the input
    may hold anything, newlines included."""
    text = str(part)
    return text if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", text) else repr(text)[:66]


def _safe_repr(value: Any) -> str:
    """A value read from the input, shown short; repr of a huge number would raise."""
    try:
        return repr(value)[:60]
    except ValueError:
        return f"a {type(value).__name__} too large to show"


def _kind(value: Any) -> str:
    names: dict[type, str] = {list: "an array", str: "a string", bytes: "a byte string"}
    return names.get(type(value), type(value).__name__)


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:200]
