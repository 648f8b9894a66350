"""Fuzz of the payload decoder: random bytes and mutated valid payloads either decode or raise a
CodecError subclass, nothing else; a payload that decodes is the canonical encoding of what it
decodes to. The default run takes a bounded number of examples; ``make fuzz`` takes
WAI_FUZZ_EXAMPLES (default 100,000) per target."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.payload import HEADER_SIZE, decode, encode, read_header
from wai_dispatch.codec.tables import laplacian_tables
from wai_dispatch.setfacts.limits import Limits

TABLES = laplacian_tables(3, seed=7)
# Small limits keep a lying header cheap; the decoder's checks are the same at any size.
LIMITS = Limits(
    max_latent_height=16, max_latent_width=16, max_symbols=3 * 64, max_payload_bytes=4096
)
DEFAULT_EXAMPLES = 300
LONG_EXAMPLES = int(os.environ.get("WAI_FUZZ_EXAMPLES", "100000"))


def _seeds() -> list[bytes]:
    rng = np.random.default_rng(3)
    out = []
    for h, w, scale in [(1, 1, 1.0), (2, 4, 3.0), (4, 4, 20.0), (3, 5, 0.3)]:
        symbols = np.round(rng.laplace(0.0, scale, (1, 3, h, w))).astype(np.int32)
        symbols[0, 0, 0, 0] = 9999  # always at least one escape
        out.append(encode(symbols, TABLES))
    return out


SEEDS = _seeds()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "byte", "cut", "insert", "field"]))
        if kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "cut" and data:
            i = draw(st.integers(0, len(data)))
            data = data[:i] + data[i + draw(st.integers(1, 8)) :]
        elif kind == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "field" and len(data) >= HEADER_SIZE:
            # a header that lies: rewrite one u16/u32 field with a plausible value
            offset, fmt = draw(
                st.sampled_from(
                    [(6, "<H"), (8, "<H"), (10, "<H"), (12, "<I"), (16, "<I"), (20, "<I")]
                )
            )
            value = draw(st.integers(0, 20) | st.integers(0, 0xFFFF if fmt == "<H" else 0xFFFFFFFF))
            struct.pack_into(fmt, data, offset, value)
    return bytes(data)


def _check(payload: bytes) -> None:
    try:
        symbols = decode(payload, TABLES, limits=LIMITS)
    except CodecError as exc:
        assert exc.code.startswith("payload_"), exc.code
        assert "\n" not in str(exc)
        return
    # It decoded: the symbols' payload is exactly these bytes (one payload per symbol array).
    assert symbols.dtype == np.int32 and symbols.shape == read_header(payload).shape
    assert encode(symbols, TABLES) == payload


INPUTS = st.one_of(
    mutated(),
    st.binary(max_size=200),
    st.binary(max_size=64).map(lambda b: b"WAIP\x01\x00" + b),
)
_FAST = settings(
    max_examples=DEFAULT_EXAMPLES,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)


@_FAST
@given(INPUTS)
def test_decoder_only_raises_codec_errors(payload: bytes) -> None:
    _check(payload)


@pytest.mark.parametrize("seed", SEEDS)
def test_seeds_decode(seed: bytes) -> None:
    _check(seed)
    assert decode(seed, TABLES, limits=LIMITS).size > 0


@pytest.mark.fuzz
@settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
    database=None,
)
@given(INPUTS)
def test_decoder_fuzz_long(payload: bytes) -> None:
    _check(payload)
