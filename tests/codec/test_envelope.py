"""The envelope (docs/envelope.md): both forms round-trip, pins follow §2, and every bad input
is a typed error with its stable code."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import cbor2
import jsonschema
import pytest

from wai_dispatch.codec import envelope as env
from wai_dispatch.codec.envelope import Envelope, parse, parse_cbor, parse_json
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.dispatch import BMSHJ2018, INT_SYNTH, Capability, Pin, demand
from wai_dispatch.dispatch.tokens import Arithmetic, RegistryClass, Tier
from wai_dispatch.setfacts.limits import Limits

A = "a" * 64
B = "b" * 64
C = "c" * 64
SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "envelope.schema.json"
ENTROPY_EXACT = Capability(
    "test.entropy-exact", RegistryClass.NEURAL_ENTROPY_EXACT, Arithmetic.FLOAT
)


def full() -> Envelope:
    return Envelope(
        capability=BMSHJ2018.name,
        payload=bytes(range(256)),
        set=A,
        intent="archive",
        pins=(
            {"capability": BMSHJ2018.name, "set": A, "tier": "decode-equivalence", "x": [1, {}]},
            {"capability": ENTROPY_EXACT.name, "set": B, "tier": "no-such-tier"},
        ),
        fallback={"capability": ENTROPY_EXACT.name, "payload": b"\x00\xff"},
    )


def minimal_obj(**extra: Any) -> dict[str, Any]:
    return {"format": "wai-envelope/1", "capability": "c", "payload": "", **extra}


def jbytes(obj: Any) -> bytes:
    return json.dumps(obj).encode()


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "envelope",
    [full(), Envelope(capability="c", payload=b""), Envelope(capability="c", payload=b"\x00")],
    ids=["full", "minimal", "one-byte"],
)
def test_round_trips(envelope: Envelope) -> None:
    assert parse_json(envelope.to_json()) == envelope
    assert parse_cbor(envelope.to_cbor()) == envelope
    assert parse(envelope.to_json()) == envelope
    assert parse(envelope.to_cbor()) == envelope
    assert parse_json(envelope.to_json().decode()) == envelope  # str accepted too
    assert parse(b" \n\t" + envelope.to_json()) == envelope  # sniffed after whitespace


def test_forms_carry_the_payload_as_their_bytes() -> None:
    e = Envelope(capability="c", payload=b"\x01\x02\x03")
    assert json.loads(e.to_json())["payload"] == "AQID"
    assert cbor2.loads(e.to_cbor())["payload"] == b"\x01\x02\x03"
    assert json.loads(e.to_json()) == {
        "format": "wai-envelope/1",
        "capability": "c",
        "payload": "AQID",
    }


def test_pin_keeps_unknown_tokens_and_tier_strings() -> None:
    e = parse_json(full().to_json())
    pin = e.pin_for(BMSHJ2018.name)
    assert pin is not None and pin.model_extra == {"x": [1, {}]}
    assert json.loads(e.to_json())["pins"][0]["x"] == [1, {}]
    assert e.pin_for(ENTROPY_EXACT.name).tier == "no-such-tier"  # type: ignore[union-attr]


def test_json_schema_accepts_the_json_form() -> None:
    schema = env.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(full().to_json()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(minimal_obj(extra=1), schema)


def test_schema_file_is_current() -> None:
    text = json.dumps(env.json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("WAI_REGEN_GOLDEN") == "1":
        SCHEMA.write_text(text, encoding="utf-8")
    assert SCHEMA.exists(), "docs/envelope.schema.json missing: run with WAI_REGEN_GOLDEN=1"
    assert SCHEMA.read_text(encoding="utf-8") == text, (
        "schema stale: regenerate with WAI_REGEN_GOLDEN=1"
    )


# --- pins (§2) ------------------------------------------------------------------------------


def test_dispatch_pins() -> None:
    assert full().dispatch_pins() == [
        Pin(BMSHJ2018.name, A, "decode-equivalence"),
        Pin(ENTROPY_EXACT.name, B, "no-such-tier"),
    ]


def test_parts_carry_their_own_pin() -> None:
    primary, fallback = full().parts()
    assert (primary.role, primary.capability, primary.set) == ("primary", BMSHJ2018.name, A)
    assert primary.pin == Pin(BMSHJ2018.name, A, "decode-equivalence")
    assert (fallback.role, fallback.capability, fallback.payload) == (
        "fallback",
        ENTROPY_EXACT.name,
        b"\x00\xff",
    )
    assert fallback.pin == Pin(ENTROPY_EXACT.name, B, "no-such-tier")
    assert fallback.set == B  # no set named: the pin's set


def test_fallback_reads_no_pin_of_the_primarys() -> None:
    # The primary's pin states decode-equivalence; the fallback's decode does not read it.
    e = Envelope(
        capability=INT_SYNTH.name,
        payload=b"p",
        pins=({"capability": INT_SYNTH.name, "set": A, "tier": "decode-equivalence"},),
        fallback={"capability": BMSHJ2018.name, "payload": b"f"},
    )
    primary, fallback = e.parts()
    assert fallback.pin is None and fallback.pins() == []
    assert demand(BMSHJ2018, intent=e.intent, pins=fallback.pins()) is Tier.NONE
    assert demand(BMSHJ2018, intent=e.intent, pins=e.dispatch_pins()) is Tier.NONE
    assert demand(INT_SYNTH, intent=e.intent, pins=primary.pins()) is Tier.DECODE_EQUIVALENCE


def test_pin_tier_over_the_part_raises_its_need() -> None:
    e = full()
    primary, fallback = e.parts()
    assert demand(BMSHJ2018, pins=primary.pins()) is Tier.DECODE_EQUIVALENCE
    # an unknown tier token adds nothing (§2)
    assert demand(ENTROPY_EXACT, pins=fallback.pins()) is Tier.ENTROPY_CONSISTENCY


def test_intent_replicate_is_carried() -> None:
    e = parse_json(jbytes(minimal_obj(intent="replicate")))
    assert demand(BMSHJ2018, intent=e.intent) is Tier.DECODE_EQUIVALENCE
    assert parse_json(jbytes(minimal_obj(intent="something-else"))).intent == "something-else"


def test_part_without_set_or_pin_uses_the_default() -> None:
    assert Envelope(capability="c", payload=b"").primary().set is None


# --- bad input ------------------------------------------------------------------------------

BAD_JSON: list[tuple[str, bytes, str]] = [
    ("not-json", b"{nope", "envelope_malformed"),
    ("truncated", b'{"format": "wai-envelope/1"', "envelope_malformed"),
    ("trailing", jbytes(minimal_obj()) + b"{}", "envelope_malformed"),
    ("bad-utf8", b'{"format": "\xff"}', "envelope_malformed"),
    (
        "duplicate-key",
        b'{"format":"wai-envelope/1","format":"wai-envelope/1"}',
        "envelope_malformed",
    ),
    (
        "nan",
        b'{"format":"wai-envelope/1","capability":"c","payload":"","x":NaN}',
        "envelope_malformed",
    ),
    ("deep", b"{" + b'"a":[' * 100000, "envelope_malformed"),
    ("array", b"[]", "envelope_invalid"),  # JSON, and an envelope is an object
    ("not-object", b" 3", "envelope_malformed"),
    ("no-format", jbytes({"capability": "c", "payload": ""}), "envelope_invalid"),
    ("format-v2", jbytes(minimal_obj(format="wai-envelope/2")), "envelope_format_unsupported"),
    ("format-int", jbytes(minimal_obj(format=1)), "envelope_format_unsupported"),
    ("no-capability", jbytes({"format": "wai-envelope/1", "payload": ""}), "envelope_invalid"),
    ("no-payload", jbytes({"format": "wai-envelope/1", "capability": "c"}), "envelope_invalid"),
    ("capability-int", jbytes(minimal_obj(capability=3)), "envelope_invalid"),
    ("capability-empty", jbytes(minimal_obj(capability="")), "envelope_invalid"),
    ("payload-int", jbytes(minimal_obj(payload=3)), "envelope_invalid"),
    ("base64-chars", jbytes(minimal_obj(payload="!!!!")), "envelope_invalid"),
    ("base64-padding", jbytes(minimal_obj(payload="AQI")), "envelope_invalid"),
    ("base64-urlsafe", jbytes(minimal_obj(payload="-_-_")), "envelope_invalid"),
    ("intent-int", jbytes(minimal_obj(intent=1)), "envelope_invalid"),
    ("set-short", jbytes(minimal_obj(set="abc")), "envelope_invalid"),
    ("set-upper", jbytes(minimal_obj(set="A" * 64)), "envelope_invalid"),
    ("unknown-field", jbytes(minimal_obj(extra=1)), "envelope_unknown_field"),
    # found by the long fuzz run: a member name holding a newline made a two-line message
    ("unknown-field-newline", jbytes(minimal_obj(**{"\n": ""})), "envelope_unknown_field"),
    ("pins-object", jbytes(minimal_obj(pins={})), "envelope_invalid"),
    ("pin-no-set", jbytes(minimal_obj(pins=[{"capability": "c"}])), "envelope_invalid"),
    (
        "pin-bad-set",
        jbytes(minimal_obj(pins=[{"capability": "c", "set": "x"}])),
        "envelope_invalid",
    ),
    (
        "pin-tier-int",
        jbytes(minimal_obj(pins=[{"capability": "c", "set": A, "tier": 3}])),
        "envelope_invalid",
    ),
    (
        "duplicate-pin",
        jbytes(minimal_obj(pins=[{"capability": "c", "set": A}, {"capability": "c", "set": B}])),
        "envelope_duplicate_pin",
    ),
    (
        "pin-conflict",
        jbytes(minimal_obj(set=A, pins=[{"capability": "c", "set": B}])),
        "envelope_pin_conflict",
    ),
    (
        "fallback-same-capability",
        jbytes(minimal_obj(fallback={"capability": "c", "payload": ""})),
        "envelope_invalid",
    ),
    (
        "fallback-unknown-field",
        jbytes(minimal_obj(fallback={"capability": "d", "payload": "", "pins": []})),
        "envelope_unknown_field",
    ),
    (
        "fallback-bad-base64",
        jbytes(minimal_obj(fallback={"capability": "d", "payload": "@"})),
        "envelope_invalid",
    ),
    (
        "fallback-pin-conflict",
        jbytes(
            minimal_obj(
                fallback={"capability": "d", "payload": "", "set": A},
                pins=[{"capability": "d", "set": C}],
            )
        ),
        "envelope_pin_conflict",
    ),
]


@pytest.mark.parametrize(
    ("data", "code"), [(d, c) for _, d, c in BAD_JSON], ids=[i for i, _, _ in BAD_JSON]
)
def test_bad_json(data: bytes, code: str) -> None:
    with pytest.raises(CodecError) as info:
        parse(data)
    assert info.value.code == code
    assert "\n" not in info.value.message
    assert "pydantic" not in info.value.message.lower()
    assert not isinstance(info.value.__cause__, Exception) or isinstance(
        info.value.__cause__, CodecError
    )


def cb(obj: Any) -> bytes:
    return bytes(cbor2.dumps(obj))


CBOR_MIN = {"format": "wai-envelope/1", "capability": "c", "payload": b""}
BAD_CBOR: list[tuple[str, bytes, str]] = [
    ("empty", b"", "envelope_malformed"),
    ("truncated", cb(CBOR_MIN)[:-3], "envelope_malformed"),
    ("trailing", cb(CBOR_MIN) + b"\x00", "envelope_malformed"),
    (
        "huge-length",
        bytes.fromhex("a1") + bytes.fromhex("5bffffffffffffffff"),
        "envelope_malformed",
    ),
    (
        "duplicate-key",
        bytes.fromhex("a2") + cb("format") + cb(1) + cb("format") + cb(2),
        "envelope_malformed",
    ),
    ("bad-regex-tag", bytes.fromhex("d823623f28"), "envelope_malformed"),
    ("deep", b"\x81" * 5000, "envelope_malformed"),
    ("not-a-map", cb([1, 2]), "envelope_invalid"),
    ("payload-text", cb({**CBOR_MIN, "payload": "AQID"}), "envelope_invalid"),
    ("int-key", cb({**CBOR_MIN, 1: 2}), "envelope_malformed"),  # keys are text (docs)
    ("bytes-key", cb({**CBOR_MIN, b"format": 2}), "envelope_malformed"),
    ("datetime-tag", cb({**CBOR_MIN, "intent": cbor2.CBORTag(1, 0)}), "envelope_invalid"),
    (
        "pin-bytes-token",
        cb({**CBOR_MIN, "pins": [{"capability": "c", "set": A, "x": b"1"}]}),
        "envelope_invalid",
    ),
    (
        "pin-int-key",
        cb({**CBOR_MIN, "pins": [{"capability": "c", "set": A, 1: 2}]}),
        "envelope_malformed",
    ),
    (
        "pin-bytes-key",
        cb({**CBOR_MIN, "pins": [{"capability": "c", "set": A, b"k": 2}]}),
        "envelope_malformed",
    ),
    (
        "pin-nan",
        cb({**CBOR_MIN, "pins": [{"capability": "c", "set": A, "x": float("nan")}]}),
        "envelope_invalid",
    ),
]


@pytest.mark.parametrize(
    ("data", "code"), [(d, c) for _, d, c in BAD_CBOR], ids=[i for i, _, _ in BAD_CBOR]
)
def test_bad_cbor(data: bytes, code: str) -> None:
    with pytest.raises(CodecError) as info:
        parse_cbor(data)
    assert info.value.code == code
    assert "\n" not in info.value.message


BIG = 10**5000  # over Python's int-to-str limit (4300 digits)
MAP_HEAD = bytes.fromhex("a3") + cb("format") + cb("wai-envelope/1") + cb("capability") + cb("c")
HOSTILE_CBOR: list[tuple[str, bytes, str, str]] = [
    # tag 28 marks a value shareable, tag 29 refers back to it: a list that holds itself.
    ("cyclic-shared-ref", bytes.fromhex("d81c81d81d00"), "envelope_malformed", "cycle"),
    (
        "cyclic-ref-in-pin",
        bytes.fromhex("a4")
        + cb("format")
        + cb("wai-envelope/1")
        + cb("capability")
        + cb("c")
        + cb("payload")
        + cb(b"")
        + cb("pins")
        + bytes.fromhex("d81c81d81d00"),
        "envelope_malformed",
        "cycle",
    ),
    ("bignum-format", cb({**CBOR_MIN, "format": BIG}), "envelope_invalid", "64-bit"),
    ("bignum-capability", cb({**CBOR_MIN, "capability": BIG}), "envelope_invalid", "64-bit"),
    ("bignum-set", cb({**CBOR_MIN, "set": -BIG}), "envelope_invalid", "64-bit"),
    (
        "bignum-pin-token",
        cb({**CBOR_MIN, "pins": [{"capability": "c", "set": A, "x": BIG}]}),
        "envelope_invalid",
        "64-bit",
    ),
    (
        "small-bignum-pin-token",
        cb({**CBOR_MIN, "pins": [{"capability": "c", "set": A, "x": 2**64}]}),
        "envelope_invalid",
        "64-bit",
    ),
    ("bignum-in-payload-map", MAP_HEAD + cb("payload") + cb(BIG), "envelope_invalid", "64-bit"),
]


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [(d, c, w) for _, d, c, w in HOSTILE_CBOR],
    ids=[i for i, _, _, _ in HOSTILE_CBOR],
)
def test_hostile_cbor_is_a_typed_error(data: bytes, code: str, words: str) -> None:
    """Shared references that make a cycle and bignums where a value belongs: a typed one-line
    error, never RecursionError or the int-to-str ValueError (here or in to_json)."""
    with pytest.raises(CodecError) as info:
        parse(data)
    assert info.value.code == code
    assert words in info.value.message
    assert "\n" not in info.value.message


def test_shared_reference_without_a_cycle_still_reads() -> None:
    """A value shared twice (tag 28/29, no cycle) is the same JSON value in both places."""
    note = cbor2.CBORTag(28, ["n"])
    obj = {
        **CBOR_MIN,
        "pins": [{"capability": "c", "set": A, "x": note, "y": cbor2.CBORTag(29, 0)}],
    }
    envelope = parse(cb(obj))
    assert envelope.pins[0].to_obj()["y"] == ["n"]
    assert parse(envelope.to_json()) == envelope


def test_kept_integers_within_64_bits_round_trip() -> None:
    for n in (2**64 - 1, -(2**64)):
        obj = {**CBOR_MIN, "pins": [{"capability": "c", "set": A, "x": n}]}
        envelope = parse(cb(obj))
        assert parse(envelope.to_json()) == envelope == parse(envelope.to_cbor())
    big = jbytes(minimal_obj(pins=[{"capability": "c", "set": A, "x": 2**64}]))
    with pytest.raises(CodecError, match="64-bit"):
        parse(big)


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b"[1, 2]", "envelope_invalid", "an array"),
        (b"  [\n]", "envelope_invalid", "an array"),
        (b"\xef\xbb\xbf{}", "envelope_malformed", "byte-order mark"),
        (b"\xef\xbb\xbf", "envelope_malformed", "byte-order mark"),
        (b"   \n\t ", "envelope_malformed", "empty"),
        (b"", "envelope_malformed", "empty"),
    ],
    ids=["json-array", "json-array-ws", "bom", "bom-only", "whitespace", "empty"],
)
def test_messages_say_what_the_file_is(data: bytes, code: str, words: str) -> None:
    """A JSON array, a UTF-8 byte-order mark or a blank file is not reported as "not CBOR"."""
    with pytest.raises(CodecError) as info:
        parse(data)
    assert info.value.code == code
    assert words in info.value.message
    assert "not CBOR" not in info.value.message


def test_bad_base64_code_agrees_with_the_docs() -> None:
    """docs/errors.md and docs/envelope.md name the code the parser raises for bad base64."""
    with pytest.raises(CodecError) as info:
        parse_json(jbytes(minimal_obj(payload="!!!!")))
    code = info.value.code
    root = Path(__file__).resolve().parents[2]
    for doc in ("docs/errors.md", "docs/envelope.md"):
        rows = [
            line
            for line in (root / doc).read_text().splitlines()
            if "base64" in line and "|" in line
        ]
        assert rows and all(f"`{code}`" in row for row in rows), (doc, rows)


def test_error_names_the_location() -> None:
    with pytest.raises(env.EnvelopeError, match=r"pins\.0\.set"):
        parse_json(jbytes(minimal_obj(pins=[{"capability": "c", "set": "x"}])))
    with pytest.raises(env.EnvelopeUnknownField, match="extra"):
        parse_json(jbytes(minimal_obj(extra=1)))


# --- limits ---------------------------------------------------------------------------------


def test_envelope_over_the_limit_is_refused_before_parsing() -> None:
    limits = Limits(max_envelope_bytes=100)
    with pytest.raises(env.EnvelopeTooLarge):
        parse_json(b"{" + b" " * 200, limits=limits)  # would be malformed: size is checked first
    with pytest.raises(env.EnvelopeTooLarge):
        parse_cbor(b"\xff" * 101, limits=limits)


@pytest.mark.parametrize("size", [10, 11, 64])
def test_payload_limit(size: int) -> None:
    limits = Limits(max_payload_bytes=10)
    e = Envelope(capability="c", payload=b"x" * size)
    f = Envelope(capability="c", payload=b"", fallback={"capability": "d", "payload": b"x" * size})
    for envelope in (e, f):
        for data in (envelope.to_json(), envelope.to_cbor()):
            if size <= 10:
                assert parse(data, limits=limits) == envelope
            else:
                with pytest.raises(env.EnvelopeTooLarge):
                    parse(data, limits=limits)


def test_oversize_base64_is_refused_before_decoding() -> None:
    # not even valid base64: the length alone refuses it
    data = jbytes(minimal_obj(payload="!" * 1000))
    with pytest.raises(env.EnvelopeTooLarge):
        parse_json(data, limits=Limits(max_payload_bytes=10))


# Every base64 member (the payload and the fallback's) reads only the canonical spelling: a
# decoder that took any of these would hand the codec bytes the sender never meant.
NOT_CANONICAL = {
    "unpadded-one": "AQI",
    "unpadded-two": "AQ",
    "padding-short": "AQ=",
    "padding-extra": "AQID====",
    "padding-inside": "AQ==AQID",
    "padding-leading": "=AQI",
    "unused-bits-set": "AR==",
    "unused-bits-set-one-pad": "AQJ=",
    "lone-char": "AQIDB",
    "newline": "AQID\nAQID",
    "trailing-newline": "AQI=\n",
    "space": "AQ I=",
    "url-safe": "-_-_",
    "bad-alphabet": "AQ*=",
    "non-ascii": "AQIé",
}


@pytest.mark.parametrize("where", ["payload", "fallback"])
@pytest.mark.parametrize("text", NOT_CANONICAL.values(), ids=NOT_CANONICAL.keys())
def test_base64_is_read_only_in_its_canonical_spelling(text: str, where: str) -> None:
    obj = minimal_obj(payload=text)
    if where == "fallback":
        obj = minimal_obj(fallback={"capability": "d", "payload": text})
    with pytest.raises(CodecError) as info:
        parse(jbytes(obj))
    assert info.value.code == "envelope_invalid"
    assert info.value.message.startswith(where)


def test_base64_payload_exact() -> None:
    payload = os.urandom(100)
    e = parse_json(jbytes(minimal_obj(payload=base64.b64encode(payload).decode())))
    assert e.payload == payload


@pytest.mark.parametrize("tier", [5, True, ["none"], {"a": 1}, 1.5])
def test_a_pin_tier_that_is_not_text_is_envelope_invalid(tier: object) -> None:
    obj = {
        "format": "wai-envelope/1",
        "capability": "wai.neural.bmshj2018",
        "payload": "AAAA",
        "pins": [{"capability": "wai.neural.bmshj2018", "set": "a" * 64, "tier": tier}],
    }
    with pytest.raises(env.EnvelopeError) as info:
        parse_json(json.dumps(obj).encode())
    assert info.value.code == "envelope_invalid"
    assert str(info.value) == "pins.0.tier: is a string"


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(100), "a PNG picture"),
        (b"\xff\xd8\xff\xe0" + bytes(100), "a JPEG picture"),
    ],
)
def test_a_picture_given_to_decode_is_named(data: bytes, what: str) -> None:
    """Issue 29, item 8: it was "not CBOR: 106812 bytes after the envelope"."""
    from wai_dispatch.codec.envelope import parse_cbor
    from wai_dispatch.dispatch.errors import WaiError

    with pytest.raises(WaiError) as caught:
        parse_cbor(data)
    assert caught.value.code == "envelope_malformed"
    assert caught.value.message.startswith(f"{what}, not an envelope (JSON or CBOR)")
