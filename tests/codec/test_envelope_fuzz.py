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
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.setfacts.limits import Limits

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
    | st.integers(-(2**64), 2**64 - 1)  # CBOR's own integers; a bignum is refused (docs)
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
@pytest.mark.slow
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


# CBOR items built head by head, so tags the encoder never writes appear: shared values and
# references (28/29, to indexes that may or may not exist, cycles included), bignums (2/3),
# the self-describe tag (55799), and tags no reader knows.
def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for extra, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | extra]) + n.to_bytes(size, "big")
    raise ValueError(n)


CBOR_LEAF = st.one_of(
    st.integers(0, 2**64 - 1).map(lambda n: _head(0, n)),
    st.integers(0, 2**64 - 1).map(lambda n: _head(1, n)),
    st.binary(max_size=8).map(lambda b: _head(2, len(b)) + b),
    st.text(max_size=8).map(lambda t: _head(3, len(t.encode())) + t.encode()),
    st.sampled_from(["format", "capability", "payload", "set", "pins", "tier"]).map(
        lambda t: _head(3, len(t)) + t.encode()
    ),
    st.sampled_from([b"\xf4", b"\xf5", b"\xf6", b"\xf7", b"\xfb\x7f\xf8\x00\x00\x00\x00\x00\x00"]),
    st.integers(0, 6).map(lambda i: _head(6, 29) + _head(0, i)),  # a shared reference
    st.binary(min_size=1, max_size=16).map(lambda b: _head(6, 2) + _head(2, len(b)) + b),
    # a bignum over Python's int-to-str limit, and a shared array that holds itself
    st.just(_head(6, 3) + _head(2, 1800) + b"\x01" * 1800),
    st.integers(0, 2).map(lambda i: _head(6, 28) + _head(4, 1) + _head(6, 29) + _head(0, i)),
)


def _cbor_tree(inner: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    tags = st.sampled_from([28, 28, 29, 2, 3, 55799, 1, 4, 30, 258, 1 << 40])
    return st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: _head(4, len(xs)) + b"".join(xs)),
        st.lists(st.tuples(inner, inner), max_size=3).map(
            lambda kv: _head(5, len(kv)) + b"".join(k + v for k, v in kv)
        ),
        st.tuples(tags, inner).map(lambda tv: _head(6, tv[0]) + tv[1]),
    )


CBOR_ITEM = st.recursive(CBOR_LEAF, _cbor_tree, max_leaves=12)


@st.composite
def cbor_envelopes(draw: st.DrawFn) -> bytes:
    """An envelope map whose members (or extra ones) are hostile CBOR items."""
    members = [
        (b"\x66format", draw(st.just(b"\x6ewai-envelope/1") | CBOR_ITEM)),
        (b"\x6acapability", draw(st.just(b"\x61c") | CBOR_ITEM)),
        (b"\x67payload", draw(st.just(b"\x40") | CBOR_ITEM)),
    ]
    if draw(st.booleans()):
        pin = _head(5, 3) + b"\x6acapability\x61c\x63set" + _head(3, 64) + b"a" * 64
        members.append((b"\x64pins", _head(4, 1) + pin + b"\x61x" + draw(CBOR_ITEM)))
    body = _head(5, len(members)) + b"".join(k + v for k, v in members)
    return draw(st.sampled_from([b"", b"\xd9\xd9\xf7", b"\xd8\x1c"])) + body


@BOUNDED
@given(cbor_envelopes() | CBOR_ITEM)
def test_cbor_tags_and_shared_references(data: bytes) -> None:
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
        cbor_envelopes(),
    )
)
def test_fuzz_long(data: bytes) -> None:
    only_codec_errors(data, parse)
    only_codec_errors(data, parse_json)
    only_codec_errors(data, parse_cbor)
