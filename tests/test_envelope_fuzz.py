"""Fuzzing the envelope parsers: random bytes and mutated valid envelopes, in both forms, raise
nothing but :class:`codec.errors.CodecError` (and parse to an envelope that round-trips).

The default suite runs a bounded number of examples (derandomized when ``CI`` is set); the
``fuzz`` marker runs ``WAI_FUZZ_EXAMPLES`` (default 100,000) for the dedicated run (`make fuzz`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wai_dispatch.codec.envelope import Envelope, parse, parse_cbor, parse_json
from wai_dispatch.codec.errors import CodecError, Limits

LIMITS = Limits(max_envelope_bytes=1 << 16, max_payload_bytes=1 << 12)
BOUNDED = settings(
    max_examples=300,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LONG = settings(
    max_examples=int(os.environ.get("WAI_FUZZ_EXAMPLES", "100000")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
    database=None,
)

DIGEST = st.text("0123456789abcdef", min_size=64, max_size=64)
TOKEN = st.text(min_size=1, max_size=12)
JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def envelopes(draw: st.DrawFn) -> Envelope:
    capability = draw(TOKEN)
    pins = []
    for cap in draw(st.lists(TOKEN, unique=True, max_size=3)):
        pin: dict[str, object] = {"capability": cap, "set": draw(DIGEST)}
        if draw(st.booleans()):
            pin["tier"] = draw(st.sampled_from(["decode-equivalence", "none", "zzz"]))
        pin.update(
            draw(st.dictionaries(st.sampled_from(["x", "note", "why"]), JSON_VALUE, max_size=2))
        )
        pins.append(pin)
    fallback = None
    if draw(st.booleans()):
        fallback = {"capability": capability + "-fb", "payload": draw(st.binary(max_size=32))}
    return Envelope(
        capability=capability,
        payload=draw(st.binary(max_size=64)),
        intent=draw(st.none() | st.sampled_from(["replicate", "archive"])),
        pins=pins,
        fallback=fallback,
    )


A = "a" * 64
B = "0123456789abcdef" * 4
# Valid envelopes the mutations start from: fixed, so drawing one costs nothing and a long run
# spends its time in the parsers, not in generating structure.
SEEDS = [
    Envelope(capability="c", payload=b""),
    Envelope(capability="wai.neural.bmshj2018", payload=bytes(range(48)), set=A),
    Envelope(
        capability="wai.neural.bmshj2018",
        payload=b"\x00\x01\xff" * 5,
        intent="replicate",
        pins=(
            {"capability": "wai.neural.bmshj2018", "set": A, "tier": "decode-equivalence"},
            {"capability": "wai.neural.int_synth", "set": B, "note": [1, 2.5, None, {"k": "v"}]},
        ),
        fallback={"capability": "wai.neural.int_synth", "payload": b"\x10" * 7, "set": B},
    ),
    Envelope(
        capability="ü.ñ", payload=b"x", intent="archive", pins=({"capability": "ü.ñ", "set": B},)
    ),
]
SEED_FORMS = {
    "json": [e.to_json() for e in SEEDS],
    "cbor": [e.to_cbor() for e in SEEDS],
}


@st.composite
def mutated(draw: st.DrawFn, form: str) -> bytes:
    data = bytearray(draw(st.sampled_from(SEED_FORMS[form])))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "splice"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 4))]
        elif op == "truncate":
            del data[pos:]
        elif op == "splice":
            data[pos : pos + 1] = draw(
                st.sampled_from([b"{", b"}", b'"', b"\\", b"\xff", b"\x5b", b"\xa1", b"\x9f"])
            )
    return bytes(data)


def only_codec_errors(data: bytes, parser: Callable[..., Envelope]) -> None:
    try:
        envelope = parser(data, limits=LIMITS)
    except CodecError as exc:
        assert exc.code.startswith("envelope_"), exc.code
        assert "\n" not in exc.message
        return
    # Whatever parses round-trips through both forms.
    assert parse_json(envelope.to_json(), limits=LIMITS) == envelope
    assert parse_cbor(envelope.to_cbor(), limits=LIMITS) == envelope


def roundtrip(envelope: Envelope) -> None:
    assert parse(envelope.to_json()) == envelope
    assert parse(envelope.to_cbor()) == envelope


# --- the bounded run (default suite) --------------------------------------------------------


@BOUNDED
@given(envelopes() | st.sampled_from(SEEDS))
def test_generated_envelopes_round_trip(envelope: Envelope) -> None:
    roundtrip(envelope)


@BOUNDED
@given(st.binary(max_size=256))
def test_random_bytes(data: bytes) -> None:
    only_codec_errors(data, parse)


@BOUNDED
@given(mutated("json"))
def test_mutated_json(data: bytes) -> None:
    only_codec_errors(data, parse_json)
    only_codec_errors(data, parse)


@BOUNDED
@given(mutated("cbor"))
def test_mutated_cbor(data: bytes) -> None:
    only_codec_errors(data, parse_cbor)
    only_codec_errors(data, parse)


# --- the long run (`make fuzz`) -------------------------------------------------------------


@pytest.mark.fuzz
@LONG
@given(
    st.one_of(
        st.binary(max_size=512),
        mutated("json"),
        mutated("cbor"),
    )
)
def test_fuzz_long(data: bytes) -> None:
    only_codec_errors(data, parse)
    only_codec_errors(data, parse_json)
    only_codec_errors(data, parse_cbor)
