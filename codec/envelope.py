"""The envelope a fleet sink sends (``wai-envelope/1``): its models, its typed errors, its
JSON Schema, and reading its JSON and CBOR forms within the limits, every bad input a typed
:class:`EnvelopeError` (docs/envelope.md).

Error tree (all :class:`codec.errors.CodecError`)::

    EnvelopeError              envelope_invalid: wrong type, missing member, bad digest or base64
    ├── EnvelopeMalformed      envelope_malformed: not JSON or CBOR, duplicate keys, trailing data
    ├── EnvelopeTooLarge       envelope_too_large: the envelope or a payload over its limit
    ├── EnvelopeUnknownField   envelope_unknown_field: a member this format does not define
    ├── EnvelopeFormat         envelope_format_unsupported: ``format`` is not ``wai-envelope/1``
    ├── DuplicatePin           envelope_duplicate_pin: two pins over one capability
    └── PinConflict            envelope_pin_conflict: a part's ``set`` and its pin name two sets
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import cbor2
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBytes,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.errors import Malformed, TooLarge
from wai_dispatch.dispatch.rules import Pin
from wai_dispatch.setfacts.limits import Limits

FORMAT: Final = "wai-envelope/1"
DIGEST_PATTERN: Final = r"^[0-9a-f]{64}$"
#: Padded standard base64 (the canonical spelling also has its unused bits zero).
BASE64_PATTERN: Final = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_DEFAULT_LIMITS: Final = Limits()
_MAX_DEPTH: Final = 32  # nesting inside a pin's kept tokens; the models themselves are shallow
# Integers CBOR writes without a bignum tag (major types 0 and 1); a kept token outside them
# would not survive the JSON form on every reader, and a huge one not even Python's int-to-str.
_INT_MIN: Final = -(1 << 64)
_INT_MAX: Final = (1 << 64) - 1
_BIGNUM: Final = "a number outside CBOR's 64-bit integers (a bignum) has no place in wai-envelope/1"
_BOM: Final = b"\xef\xbb\xbf"


class EnvelopeError(CodecError):
    """a member of the wrong type or missing (the message gives its location), bad base64, or an
    integer outside CBOR's 64-bit ones (a bignum)"""

    code = "envelope_invalid"


class EnvelopeMalformed(Malformed, EnvelopeError):
    """not JSON, not CBOR, an empty file, a UTF-8 byte-order mark, duplicate keys, trailing bytes,
    or CBOR shared references that make a cycle"""

    code = "envelope_malformed"


class EnvelopeTooLarge(TooLarge, EnvelopeError):
    """an envelope or its payload over Limits.max_envelope_bytes / max_payload_bytes, or CBOR
    shared references that expand it past the bytes read"""

    code = "envelope_too_large"


class EnvelopeUnknownField(EnvelopeError):
    """a member wai-envelope/1 does not define"""

    code = "envelope_unknown_field"


class EnvelopeFormat(EnvelopeError):
    """a format other than wai-envelope/1"""

    code = "envelope_format_unsupported"


class DuplicatePin(EnvelopeError):
    """two pins over one capability"""

    code = "envelope_duplicate_pin"


class PinConflict(EnvelopeError):
    """a part's set differs from its pin's set"""

    code = "envelope_pin_conflict"


# Error types our own validators raise (PydanticCustomError), mapped back to their classes.
_CUSTOM: Final[dict[str, type[EnvelopeError]]] = {
    cls.code: cls
    for cls in (
        EnvelopeMalformed,
        EnvelopeTooLarge,
        EnvelopeUnknownField,
        EnvelopeFormat,
        DuplicatePin,
        PinConflict,
    )
}
_CUSTOM["extra_forbidden"] = EnvelopeUnknownField

Digest = Annotated[
    StrictStr,
    Field(pattern=DIGEST_PATTERN, description="BLAKE3 of a parameter set (64 lowercase hex)"),
]
Capability = Annotated[StrictStr, Field(min_length=1, max_length=256)]


# The JSON form carries a payload as standard base64 (RFC 4648 §4, padded); the CBOR form as a
# byte string. The schema describes the JSON form (the HTTP one).
def _payload(value: Any, info: ValidationInfo) -> Any:
    """Decode a JSON payload's base64, refusing an oversize one before decoding it."""
    ctx = info.context or {}
    limits: Limits = ctx.get("limits", _DEFAULT_LIMITS)
    if ctx.get("form") == "json":
        if not isinstance(value, str):
            raise PydanticCustomError("bytes_type", "a payload is a base64 string")
        # 4 characters per 3 bytes: anything longer cannot decode to an allowed payload.
        if len(value) > 4 * -(-limits.max_payload_bytes // 3):
            raise PydanticCustomError(
                "envelope_too_large",
                "payload over the limit of {limit} bytes",
                {"limit": limits.max_payload_bytes},
            )
        value = _strict_base64(value)
    if isinstance(value, bytes) and len(value) > limits.max_payload_bytes:
        raise PydanticCustomError(
            "envelope_too_large",
            "payload of {size} bytes over the limit of {limit}",
            {"size": len(value), "limit": limits.max_payload_bytes},
        )
    return value


def _strict_base64(text: str) -> bytes:
    """Standard base64 in its one canonical spelling (RFC 4648 §4, §3.5): padded, no whitespace,
    no padding past the last quantum, unused bits zero. Anything else is ``envelope_invalid``;
    every base64 member of the envelope is read here."""
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        data = None
    if data is None or base64.b64encode(data) != text.encode("ascii"):
        raise PydanticCustomError("base64", "a payload is padded standard base64")
    return data


Payload = Annotated[
    StrictBytes,
    BeforeValidator(_payload),
    WithJsonSchema({"type": "string", "contentEncoding": "base64", "pattern": BASE64_PATTERN}),
]


class EnvelopePin(BaseModel):
    """A pin over one capability's parameter set (§2, SPEC §3.1). Tokens other than
    ``capability``, ``set`` and ``tier`` are kept as read and change nothing (§2)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    capability: Capability
    set: Digest
    tier: StrictStr | None = Field(
        default=None,
        description="any token; only decode-equivalence changes what a decode needs (§2)",
    )

    @model_validator(mode="before")
    @classmethod
    def _kept_tokens_are_plain(cls, data: Any) -> Any:
        # Kept tokens must survive both forms unchanged, so they are JSON values: text keys,
        # finite numbers, no byte strings or CBOR tags.
        if isinstance(data, Mapping):
            for key, value in data.items():
                if not isinstance(key, str):
                    raise PydanticCustomError("envelope_invalid", "a pin's keys are text")
                if key not in ("capability", "set", "tier"):
                    _check_plain(value, 0, str(key))
        return data

    def to_obj(self) -> dict[str, Any]:
        """The pin as plain values; a kept token whose value is null stays (it was read)."""
        out: dict[str, Any] = {"capability": self.capability, "set": self.set}
        if self.tier is not None:
            out["tier"] = self.tier
        out.update(self.model_extra or {})
        return out

    def to_dispatch(self) -> Pin:
        return Pin(self.capability, self.set, self.tier)


def _check_plain(value: Any, depth: int, where: str) -> None:
    if depth > _MAX_DEPTH:
        raise PydanticCustomError("envelope_invalid", "{where}: nested too deep", {"where": where})
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise PydanticCustomError("envelope_invalid", "{where}: " + _BIGNUM, {"where": where})
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PydanticCustomError(
                "envelope_invalid", "{where}: not a finite number", {"where": where}
            )
        return
    if isinstance(value, list):
        for item in value:
            _check_plain(item, depth + 1, where)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PydanticCustomError(
                    "envelope_invalid", "{where}: keys are text", {"where": where}
                )
            _check_plain(item, depth + 1, where)
        return
    raise PydanticCustomError(
        "envelope_invalid",
        "{where}: a kept token is a JSON value, not {kind}",
        {"where": where, "kind": type(value).__name__},
    )


class Fallback(BaseModel):
    """Another capability's payload, decoded when the primary has no path (§4, SPEC §4)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capability: Capability
    payload: Payload
    set: Digest | None = None


class Envelope(BaseModel):
    """``wai-envelope/1``: the primary capability's payload, its intent and pins, and an optional
    fallback. Members this format does not define are refused (``envelope_unknown_field``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="wai-envelope/1")

    format: Literal["wai-envelope/1"] = FORMAT
    capability: Capability
    payload: Payload
    set: Digest | None = Field(
        default=None,
        description="the set the payload was coded for; absent: the pin's set, else the "
        "store's default for the capability (docs/sets.md)",
    )
    intent: StrictStr | None = Field(
        default=None, description="'replicate' needs decode-equivalence (§2); others are kept"
    )
    pins: tuple[EnvelopePin, ...] = Field(default=(), description="at most one per capability")
    fallback: Fallback | None = None

    @field_validator("pins", mode="before")
    @classmethod
    def _pins_are_a_list(cls, value: Any) -> Any:
        # Lax mode would take a dict or a set here; the wire forms carry an array.
        if not isinstance(value, list | tuple):
            raise PydanticCustomError("list_type", "pins is an array")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Envelope:
        seen: set[str] = set()
        for pin in self.pins:
            if pin.capability in seen:
                raise PydanticCustomError(
                    "envelope_duplicate_pin",
                    "two pins over {capability}",
                    {"capability": pin.capability},
                )
            seen.add(pin.capability)
        if self.fallback is not None and self.fallback.capability == self.capability:
            raise PydanticCustomError(
                "envelope_invalid", "the fallback names the primary's capability"
            )
        for part in self.parts():
            pinned = self.pin_for(part.capability)
            given = part.given_set
            if pinned is not None and given is not None and pinned.set != given:
                raise PydanticCustomError(
                    "envelope_pin_conflict",
                    "{capability}: set {given} but its pin names {pinned}",
                    {"capability": part.capability, "given": given[:12], "pinned": pinned.set[:12]},
                )
        return self

    def pin_for(self, capability: str) -> EnvelopePin | None:
        """The pin over ``capability``'s set, if the envelope has one."""
        return next((p for p in self.pins if p.capability == capability), None)

    def dispatch_pins(self) -> list[Pin]:
        """Every pin, as :func:`dispatch.demand` reads them."""
        return [p.to_dispatch() for p in self.pins]

    def primary(self) -> Part:
        return self._part("primary", self.capability, self.payload, self.set)

    def fallback_part(self) -> Part | None:
        fb = self.fallback
        return None if fb is None else self._part("fallback", fb.capability, fb.payload, fb.set)

    def parts(self) -> list[Part]:
        """The decodes in the order a sink tries them: the primary, then the fallback."""
        fb = self.fallback_part()
        return [self.primary()] if fb is None else [self.primary(), fb]

    def _part(
        self, role: Literal["primary", "fallback"], cap: str, payload: bytes, given: str | None
    ) -> Part:
        pin = self.pin_for(cap)
        return Part(role, cap, payload, given, None if pin is None else pin.to_dispatch())

    def to_obj(self, *, binary: bool) -> dict[str, Any]:
        """The envelope as plain values: payloads as bytes (CBOR) or base64 text (JSON).
        Members at their default are left out, so the forms are as small as they can be."""

        def pay(b: bytes) -> bytes | str:
            return b if binary else base64.b64encode(b).decode("ascii")

        out: dict[str, Any] = {
            "format": self.format,
            "capability": self.capability,
            "payload": pay(self.payload),
        }
        if self.set is not None:
            out["set"] = self.set
        if self.intent is not None:
            out["intent"] = self.intent
        if self.pins:
            out["pins"] = [p.to_obj() for p in self.pins]
        if self.fallback is not None:
            fb: dict[str, Any] = {
                "capability": self.fallback.capability,
                "payload": pay(self.fallback.payload),
            }
            if self.fallback.set is not None:
                fb["set"] = self.fallback.set
            out["fallback"] = fb
        return out

    def to_json(self) -> bytes:
        return json.dumps(self.to_obj(binary=False), ensure_ascii=False).encode("utf-8")

    def to_cbor(self) -> bytes:
        return bytes(cbor2.dumps(self.to_obj(binary=True)))


@dataclass(frozen=True, slots=True)
class Part:
    """One decode of an envelope: its capability and payload, the set it names, and the pin
    over *its* capability's set (§2: a fallback decode reads no pin of the primary's)."""

    role: Literal["primary", "fallback"]
    capability: str
    payload: bytes
    given_set: str | None
    pin: Pin | None

    @property
    def set(self) -> str | None:
        """The digest of the set to decode with; ``None``: the store's default (docs/sets.md)."""
        if self.given_set is not None:
            return self.given_set
        return None if self.pin is None else self.pin.digest

    def pins(self) -> list[Pin]:
        """What :func:`dispatch.demand` reads for this decode: its own pin only."""
        return [] if self.pin is None else [self.pin]


def json_schema() -> dict[str, Any]:
    """The JSON form's schema, as committed in docs/envelope.schema.json."""
    schema = Envelope.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    # The model defaults ``format`` for construction in code; on the wire it is required.
    schema["required"] = ["format", *schema.get("required", [])]
    return schema


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
