"""The entropy stage (§6.3): exact round trips with escapes, pinned payload bytes and digests, and
one typed error for each class of bad input."""

from __future__ import annotations

import os
import struct
import tracemalloc
from pathlib import Path

import blake3
import numpy as np
import pytest

from wai_dispatch.codec.errors import (
    CodecError,
    PayloadError,
    PayloadFormatError,
    PayloadLengthError,
    PayloadLimitError,
    PayloadStreamError,
    PayloadTablesMismatch,
    SymbolsError,
)
from wai_dispatch.codec.payload import (
    HEADER_SIZE,
    decode,
    encode,
    latent,
    read_header,
    symbols_digest,
)
from wai_dispatch.codec.tables import EntropyTables, laplacian_tables
from wai_dispatch.setfacts.limits import Limits

GOLDEN = Path(__file__).parent / "golden" / "payload"
REGEN = os.environ.get("WAI_REGEN_GOLDEN") == "1"

# The golden input: 3 channels of 2 x 4, with escapes below and above each table, and the int32
# extremes (CompressAI's own coder loops forever on those; ours carries them exactly).
GOLDEN_SYMBOLS = np.array(
    [
        [[0, 1, -1, 2], [500, -3, 0, 0]],
        [[-500, 0, 0, 7], [1, 1, 2**31 - 1, -1]],
        [[0, -(2**31), 3, -2], [0, 0, 0, 40]],
    ],
    dtype=np.int32,
)[None]
HEADER_FIELDS = (
    "magic",
    "version",
    "flags",
    "channels",
    "height",
    "width",
    "words",
    "esc",
    "bytes",
)


def _golden(name: str, produce: bytes) -> bytes:
    """Compare with the stored golden file; write it only when WAI_REGEN_GOLDEN=1."""
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(produce)
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run with WAI_REGEN_GOLDEN=1 to write it")
    return path.read_bytes()


@pytest.fixture(scope="module")
def tables() -> EntropyTables:
    return laplacian_tables(192, seed=11)


@pytest.fixture(scope="module")
def small() -> EntropyTables:
    data = _golden("tables.json", laplacian_tables(3, seed=7).to_json())
    return EntropyTables.from_json(data)


@pytest.fixture(scope="module")
def small_payload(small: EntropyTables) -> bytes:
    return encode(GOLDEN_SYMBOLS, small)


def _header(payload: bytes, **fields: int) -> bytes:
    """The payload with some header fields rewritten."""
    values = dict(zip(HEADER_FIELDS, struct.unpack_from("<4sBBHHHIII", payload), strict=True))
    values.update(fields)
    return struct.pack("<4sBBHHHIII", *values.values()) + payload[HEADER_SIZE:]


def _latent_like(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    return np.round(rng.laplace(0.0, scale, shape)).astype(np.int32)


# -- round trips ---------------------------------------------------------------------------------


def test_round_trip_bmshj2018_shape_with_escapes(tables: EntropyTables) -> None:
    rng = np.random.default_rng(0)
    symbols = _latent_like(rng, (1, 192, 16, 16), 2.5)
    # escapes in many channels, both sides, far and near
    where = rng.integers(0, 192 * 256, 300)
    symbols.reshape(-1)[where] = rng.choice([-70000, -200, 150, 123456789, -(2**31)], 300)
    payload = encode(symbols, tables)
    header = read_header(payload)
    assert header.shape == (1, 192, 16, 16) and header.escape_count > 250
    out = decode(payload, tables)
    assert out.dtype == np.int32 and out.shape == symbols.shape
    assert np.array_equal(out, symbols)
    assert encode(out, tables) == payload


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 2, 1, 7), (1, 5, 9, 3), (1, 192, 1, 1)])
def test_round_trip_shapes(tables: EntropyTables, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(shape))
    t = tables if shape[1] == 192 else laplacian_tables(shape[1], seed=3)
    symbols = _latent_like(rng, shape, 4.0)
    assert np.array_equal(decode(encode(symbols, t), t), symbols)


def test_every_table_index_and_the_escape_edges(tables: EntropyTables) -> None:
    # Channel c's row walks every regular value, the escape index itself (escaped, raw 0), the
    # value below the table (raw 1), and the int32 extremes.
    t = laplacian_tables(4, seed=9)
    width = int(t.cdf_lengths.max()) + 4
    symbols = np.zeros((1, 4, 1, width), dtype=np.int64)
    for c in range(4):
        low, length = int(t.offsets[c]), int(t.cdf_lengths[c])
        row = [*range(low, low + length - 1), low - 1, -(2**31), 2**31 - 1]
        symbols[0, c, 0, :] = (row * 2)[:width]
    payload = encode(symbols, t)
    assert np.array_equal(decode(payload, t), symbols.astype(np.int32))


def test_int64_and_strided_input_encode_the_same(tables: EntropyTables) -> None:
    rng = np.random.default_rng(5)
    symbols = _latent_like(rng, (1, 192, 4, 4), 2.0)
    wide = symbols.astype(np.int64)
    strided = np.asfortranarray(symbols)
    assert encode(wide, tables) == encode(strided, tables) == encode(symbols, tables)
    assert symbols_digest(wide) == symbols_digest(strided) == symbols_digest(symbols)


def test_constriction_stream_is_little_endian_words(small_payload: bytes) -> None:
    header = read_header(small_payload)
    assert header.total_bytes == len(small_payload)
    last_word = small_payload[HEADER_SIZE + 4 * header.stream_words - 4 :][:4]
    assert last_word != b"\0\0\0\0"


# -- golden values ------------------------------------------------------------------------------


def test_golden_payload_bytes(small: EntropyTables, small_payload: bytes) -> None:
    assert small_payload == _golden("small.payload", small_payload)
    assert np.array_equal(decode(_golden("small.payload", small_payload), small), GOLDEN_SYMBOLS)


def test_golden_symbols_digest() -> None:
    digest = symbols_digest(GOLDEN_SYMBOLS)
    assert digest == _golden("small.digest", digest.encode() + b"\n").decode().strip()
    # The digest is BLAKE3 over int32 little-endian in C, H, W order (§6.3), nothing else.
    flat = b"".join(struct.pack("<i", int(v)) for v in GOLDEN_SYMBOLS.reshape(-1))
    assert digest == blake3.blake3(flat).hexdigest()


def test_golden_tables_file_is_canonical(small: EntropyTables) -> None:
    assert small.to_json() == _golden("tables.json", small.to_json())


def test_digest_depends_on_order_and_value() -> None:
    base = symbols_digest(GOLDEN_SYMBOLS)
    swapped = GOLDEN_SYMBOLS.copy()
    swapped[0, 0, 0, 0], swapped[0, 0, 0, 1] = swapped[0, 0, 0, 1], swapped[0, 0, 0, 0]
    assert symbols_digest(swapped) != base
    assert symbols_digest(GOLDEN_SYMBOLS.transpose(0, 1, 3, 2).copy()) != base


# -- latent -------------------------------------------------------------------------------------


def test_latent_is_symbol_plus_median_in_float32(small: EntropyTables) -> None:
    out = latent(GOLDEN_SYMBOLS, small)
    assert out.dtype == np.float32 and out.shape == GOLDEN_SYMBOLS.shape
    expected = GOLDEN_SYMBOLS.astype(np.float32) + small.medians.reshape(1, 3, 1, 1)
    assert out.tobytes() == expected.tobytes()
    assert out[0, 1, 0, 3] == np.float32(7) + small.medians[1]


def test_latent_refuses_other_channel_counts(small: EntropyTables) -> None:
    with pytest.raises(PayloadTablesMismatch):
        latent(np.zeros((1, 4, 2, 2), dtype=np.int32), small)


# -- bad input ----------------------------------------------------------------------------------


def _code(payload: bytes, tables: EntropyTables, limits: Limits | None = None) -> str:
    with pytest.raises(PayloadError) as info:
        decode(payload, tables, limits=limits or Limits())
    assert "\n" not in str(info.value)
    return info.value.code


def test_bad_magic_and_version(small: EntropyTables, small_payload: bytes) -> None:
    assert _code(b"XAIP" + small_payload[4:], small) == "payload_magic"
    assert _code(b"\x89PNG\r\n\x1a\n" + bytes(40), small) == "payload_magic"
    assert _code(_header(small_payload, version=3), small) == "payload_version"
    assert _code(_header(small_payload, version=0), small) == "payload_version"
    assert _code(_header(small_payload, flags=1), small) == "payload_header_invalid"


@pytest.mark.parametrize("dim", ["channels", "height", "width"])
def test_zero_dimension(small: EntropyTables, small_payload: bytes, dim: str) -> None:
    assert _code(_header(small_payload, **{dim: 0}), small) == "payload_header_invalid"


def test_every_truncation_is_payload_truncated(small: EntropyTables, small_payload: bytes) -> None:
    for n in range(len(small_payload)):
        assert _code(small_payload[:n], small) == "payload_truncated", n


def test_trailing_bytes(small: EntropyTables, small_payload: bytes) -> None:
    assert _code(small_payload + b"\0", small) == "payload_trailing"
    assert _code(small_payload + small_payload, small) == "payload_trailing"


@pytest.mark.parametrize(
    "lie",
    [
        {"height": 3},
        {"height": 1},
        {"width": 5},
        {"width": 3},
        {"height": 4, "width": 2},  # the same count: only the shape at the stream's end tells
        {"width": 200},
    ],
)
def test_header_lying_about_the_shape(
    small: EntropyTables, small_payload: bytes, lie: dict[str, int]
) -> None:
    code = _code(_header(small_payload, **lie), small)
    assert code in {"payload_stream_invalid", "payload_escape_invalid"}


def test_same_count_other_shape_is_refused_for_a_single_table() -> None:
    # With one channel and one table, a longer claim decodes the true symbols and then index 0
    # forever from the exhausted coder; a reshaped claim decodes exactly the same values. Only
    # the shape coded at the stream's end refuses both.
    t = laplacian_tables(1, seed=1)
    payload = encode(np.zeros((1, 1, 2, 6), dtype=np.int32), t)
    assert _code(_header(payload, height=3, width=4), t) == "payload_stream_invalid"
    assert _code(_header(payload, height=1, width=12), t) == "payload_stream_invalid"
    assert _code(_header(payload, width=7), t) == "payload_stream_invalid"
    assert _code(_header(payload, width=4), t) == "payload_stream_invalid"
    assert _code(_header(payload, width=250), t) == "payload_stream_invalid"


def test_empty_stream_with_a_big_shape(small: EntropyTables) -> None:
    payload = struct.pack("<4sBBHHHIII", b"WAIP", 1, 0, 3, 256, 256, 0, 0, 0)
    assert _code(payload, small) == "payload_stream_invalid"


def test_corrupted_stream(small: EntropyTables, small_payload: bytes) -> None:
    header = read_header(small_payload)
    codes = set()
    for i in range(HEADER_SIZE, HEADER_SIZE + 4 * header.stream_words):
        bad = bytearray(small_payload)
        bad[i] ^= 0x10
        try:
            out = decode(bytes(bad), small)
        except PayloadError as exc:
            codes.add(exc.code)
        else:  # a flip that still decodes is a different symbol array, never the same one
            assert not np.array_equal(out, GOLDEN_SYMBOLS)
    assert codes <= {"payload_stream_invalid", "payload_escape_invalid"} and codes


def test_zero_last_word(small: EntropyTables, small_payload: bytes) -> None:
    header = read_header(small_payload)
    end = HEADER_SIZE + 4 * header.stream_words
    bad = small_payload[: end - 4] + bytes(4) + small_payload[end:]
    assert _code(bad, small) == "payload_stream_invalid"


def test_escape_section_defects(small: EntropyTables, small_payload: bytes) -> None:
    header = read_header(small_payload)
    start = HEADER_SIZE + 4 * header.stream_words
    body, escapes = small_payload[:start], small_payload[start:]
    n = header.escape_count
    # the count in the header disagrees with the escape bins in the stream
    fewer = _header(body, esc=n - 1, bytes=len(escapes)) + escapes
    assert _code(fewer, small) in {"payload_escape_invalid", "payload_header_invalid"}
    # the first value padded to a non-minimal varint (its last byte continued, then 0x00)
    end = next(i for i, b in enumerate(escapes) if b < 0x80)
    padded = escapes[:end] + bytes([escapes[end] | 0x80, 0]) + escapes[end + 1 :]
    assert _code(_header(body, bytes=len(padded)) + padded, small) == "payload_escape_invalid"
    # a value beyond int32
    huge = b"\xff\xff\xff\xff\x0f" + escapes[1:]
    assert _code(_header(body, bytes=len(huge)) + huge, small) == "payload_escape_invalid"
    # a value that never ends
    open_ended = escapes[:-1] + bytes([escapes[-1] | 0x80])
    assert _code(small_payload[:start] + open_ended, small) == "payload_escape_invalid"
    # six bytes for one value (the section is long enough in total for the header check)
    six = b"\x81\x80\x80\x80\x80\x00" + escapes[6:] if len(escapes) >= 6 else None
    if six is not None:
        assert _code(_header(body, bytes=len(six)) + six, small) == "payload_escape_invalid"


def test_escape_bytes_out_of_range_for_count(small: EntropyTables, small_payload: bytes) -> None:
    header = read_header(small_payload)
    lie = _header(small_payload, bytes=5 * header.escape_count + 1)
    assert _code(lie, small) == "payload_header_invalid"
    assert _code(_header(small_payload, esc=10**6), small) == "payload_header_invalid"


def test_tables_disagree_with_header(small_payload: bytes) -> None:
    assert _code(small_payload, laplacian_tables(4, seed=7)) == "payload_tables_mismatch"
    assert _code(small_payload, laplacian_tables(2, seed=7)) == "payload_tables_mismatch"


@pytest.mark.parametrize(
    ("limits", "code"),
    [
        (Limits(max_payload_bytes=50), "payload_too_large"),
        (Limits(max_channels=2), "payload_shape_over_limits"),
        (Limits(max_latent_height=1), "payload_shape_over_limits"),
        (Limits(max_latent_width=3), "payload_shape_over_limits"),
        (Limits(max_symbols=23), "payload_shape_over_limits"),
    ],
)
def test_limits(small: EntropyTables, small_payload: bytes, limits: Limits, code: str) -> None:
    assert _code(small_payload, small, limits) == code
    with pytest.raises(PayloadLimitError):
        read_header(small_payload, limits=limits)


def test_a_huge_shape_is_refused_before_allocating(small: EntropyTables) -> None:
    # 3 x 65535 x 65535 symbols (51 GB as int32) claimed by a 28-byte payload: refused from the
    # header under the default limits; under limits that allow it, memory follows the stream.
    payload = struct.pack("<4sBBHHHIII", b"WAIP", 1, 0, 3, 65535, 65535, 1, 0, 0) + b"\1\0\0\0"
    generous = Limits(max_latent_height=65535, max_latent_width=65535, max_symbols=2**40)
    tracemalloc.start()
    try:
        assert _code(payload, small) == "payload_shape_over_limits"
        assert _code(payload, small, generous) == "payload_stream_invalid"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_non_bytes_payload(small: EntropyTables) -> None:
    with pytest.raises(PayloadFormatError):
        decode("WAIP", small)  # type: ignore[arg-type]


def test_errors_are_codec_errors() -> None:
    for cls in (
        PayloadError,
        PayloadFormatError,
        PayloadLengthError,
        PayloadLimitError,
        PayloadStreamError,
        PayloadTablesMismatch,
        SymbolsError,
    ):
        assert issubclass(cls, CodecError)


# -- bad symbols --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "symbols",
    [
        np.zeros((3, 2, 4), dtype=np.int32),
        np.zeros((2, 3, 2, 4), dtype=np.int32),
        np.zeros((1, 3, 0, 4), dtype=np.int32),
        np.zeros((1, 3, 2, 4), dtype=np.float32),
        np.full((1, 3, 2, 4), 2**31, dtype=np.int64),
        [[[[0]]]],
    ],
)
def test_bad_symbols(small: EntropyTables, symbols: object) -> None:
    with pytest.raises(SymbolsError):
        encode(symbols, small)  # type: ignore[arg-type]
    with pytest.raises(SymbolsError):
        symbols_digest(symbols)  # type: ignore[arg-type]


def test_encode_refuses_other_channel_counts(small: EntropyTables) -> None:
    with pytest.raises(PayloadTablesMismatch):
        encode(np.zeros((1, 4, 1, 1), dtype=np.int32), small)


def test_first_decodes_from_many_threads_agree() -> None:
    # The models are built lazily on first use; threads racing to build them must each decode
    # with exactly one model per channel.
    from concurrent.futures import ThreadPoolExecutor

    fresh = laplacian_tables(32, seed=21)
    symbols = _latent_like(np.random.default_rng(2), (1, 32, 4, 4), 3.0)
    payload = encode(symbols, laplacian_tables(32, seed=21))
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: decode(payload, fresh), range(16)))
    assert len(fresh.models()) == 32
    assert all(np.array_equal(r, symbols) for r in results)


def test_the_shape_model_is_16_raw_bits() -> None:
    # docs/payload.md: H and W are each uniform over 2^16, frequency 2^8 of 2^24 per value.
    from wai_dispatch.codec.payload import _shape_model
    from wai_dispatch.codec.tables import _verify_model

    _verify_model(_shape_model(), np.ones(1 << 16, dtype=np.int64), -1)


def test_int32_extreme_escapes_decode_without_a_warning(tables: EntropyTables) -> None:
    """Escapes of INT32_MAX and INT32_MIN decode to themselves, and the latent and a picture
    made from an output with NaN and ±inf raise no numpy warning (warnings are errors here)."""
    from wai_dispatch.service.decoding.results import to_rgb8

    symbols = np.zeros((1, 192, 2, 2), dtype=np.int64)
    symbols[0, :, 0, 0] = 2**31 - 1
    symbols[0, :, 1, 1] = -(2**31)
    got = decode(encode(symbols, tables), tables)
    assert np.array_equal(got, symbols.astype(np.int32))
    assert np.isfinite(latent(got, tables)).all()
    x = np.array([np.nan, np.inf, -np.inf, 0.5], dtype=np.float32).reshape(1, 1, 2, 2)
    rgb = to_rgb8(np.concatenate([x, x, x], axis=1))
    assert rgb[:, :, 0].tolist() == [[0, 255], [0, 128]]
