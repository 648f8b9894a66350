"""The page's entropy stage (service/web/page_files/js/codec/): the rANS decoder of our payload
format (docs/payload.md) and BLAKE3 (vendored @noble/hashes) give, inside Debian's Chromium, the
native sink's symbols and symbols_digest: on the golden payloads, on the bundled set's payload,
and on random symbols with escapes coded by codec.payload; and a broken payload is refused with
the code codec.payload gives it."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pagekit import ROOT, open_page, serve_service

from wai_dispatch.codec import payload as codec
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.tables import EntropyTables

GOLDEN = ROOT / "tests" / "codec" / "golden" / "payload"
SET = ROOT / "conformance" / "sets" / "bmshj2018-demo-q3"
SET_DIGEST = "09c6186a09fd0e7b795a2c99c0594dbfaafadfc0f47af871a26e32bfdfbe5c44"

DECODE = """async ([tablesText, bytes]) => {
    const { readTables } = await import("./js/codec/tables.js");
    const { decodePayload, symbolBytes } = await import("./js/codec/payload.js");
    const { blake3Hex } = await import("./js/decode.js");
    try {
        const { header, symbols } = decodePayload(Uint8Array.from(bytes), readTables(tablesText));
        return { shape: header.shape, digest: blake3Hex(symbolBytes(symbols)),
                 symbols: Array.from(symbols) };
    } catch (err) {
        return { error: err.code || String(err) };
    }
}"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with (
        serve_service(tmp_path_factory.mktemp("entropy")) as (url, _, token),
        browser([], token=token) as page,
    ):
        open_page(page, url)
        yield page


def decode_in_page(page: Any, tables: str, payload: bytes) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(DECODE, [tables, list(payload)])
    return result


def test_golden_payload(page: Any) -> None:
    tables = (GOLDEN / "tables.json").read_text(encoding="utf-8")
    got = decode_in_page(page, tables, (GOLDEN / "small.payload").read_bytes())
    assert got["digest"] == (GOLDEN / "small.digest").read_text().strip()
    assert got["shape"] == [1, 3, 2, 4]


def test_bundled_set_payload(page: Any) -> None:
    tables_text = (SET / "cdfs_q3.json").read_text(encoding="utf-8")
    payload = (SET / "payload.bin").read_bytes()
    got = decode_in_page(page, tables_text, payload)
    assert got["digest"] == SET_DIGEST  # the spec's symbols_digest of the set's payload
    native = codec.decode(payload, EntropyTables.from_json(tables_text))
    assert got["symbols"] == native.reshape(-1).tolist()
    assert got["shape"] == [1, 192, 16, 16]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_symbols_with_escapes(page: Any, seed: int) -> None:
    """Symbols spread well past the tables' support (so many escape, both sides, some with
    multi-byte varints) decode in the page to exactly what codec.payload decodes."""
    tables_text = (GOLDEN / "tables.json").read_text(encoding="utf-8")
    tables = EntropyTables.from_json(tables_text)
    rng = np.random.default_rng(seed)
    shape = (1, tables.channels, 1 + seed * 3, 5 + seed)
    symbols = np.round(rng.standard_cauchy(shape) * 3).clip(-(10**6), 10**6).astype(np.int32)
    payload = codec.encode(symbols, tables)
    assert struct.unpack_from("<I", payload, 16)[0] > 0  # escapes present
    got = decode_in_page(page, tables_text, payload)
    assert got["symbols"] == symbols.reshape(-1).tolist()
    assert got["digest"] == codec.symbols_digest(symbols)


def _broken() -> dict[str, bytes]:
    good = (GOLDEN / "small.payload").read_bytes()
    flipped = bytearray(good)
    flipped[30] ^= 0x5A  # inside the rANS stream
    return {
        "magic": b"XAIP" + good[4:],
        "version": good[:4] + b"\x02" + good[5:],
        "flags": good[:5] + b"\x01" + good[6:],
        "short header": good[:10],
        "truncated": good[:-1],
        "trailing": good + b"\x00",
        "zero width": good[:10] + b"\x00\x00" + good[12:],
        "channels": good[:6] + b"\x04\x00" + good[8:],
        "stream": bytes(flipped),
        "height": good[:8] + b"\x01\x00" + good[10:],
    }


@pytest.mark.parametrize("name", sorted(_broken()))
def test_broken_payload_same_code_as_native(page: Any, name: str) -> None:
    tables_text = (GOLDEN / "tables.json").read_text(encoding="utf-8")
    payload = _broken()[name]
    with pytest.raises(CodecError) as native:
        codec.decode(payload, EntropyTables.from_json(tables_text))
    got = decode_in_page(page, tables_text, payload)
    assert got == {"error": native.value.code}


CROP = """async ([bytes, width, height]) => {
    const { readHeader } = await import("./js/codec/payload.js");
    const { cropPicture } = await import("./js/decode.js");
    const header = readHeader(Uint8Array.from(bytes));
    const data = new Uint8Array(width * height * 3).map((_, i) => i % 251);
    const out = cropPicture({ width, height, data }, header.picture);
    return { picture: header.picture, headerSize: header.headerSize, width: out.width,
             height: out.height, data: Array.from(out.data) };
}"""


def test_version_2_carries_the_picture_and_the_page_crops_to_it(page: Any) -> None:
    """The golden version-2 payload (docs/payload.md): the page reads its picture, decodes the
    native symbols, and crops the synthesis's output to its top-left picture."""
    tables_text = (GOLDEN / "tables.json").read_text(encoding="utf-8")
    tables = EntropyTables.from_json(tables_text.encode())
    payload = (GOLDEN / "picture.payload").read_bytes()
    got = decode_in_page(page, tables_text, payload)
    assert got["digest"] == codec.symbols_digest(codec.decode(payload, tables))
    assert got["shape"] == [1, 3, 19, 29]
    width, height = 29 * 16, 19 * 16
    out = page.evaluate(CROP, [list(payload), width, height])
    assert out["picture"] == {"width": 451, "height": 300} and out["headerSize"] == 32
    assert (out["width"], out["height"]) == (451, 300)
    full = (np.arange(width * height * 3) % 251).astype(np.uint8).reshape(height, width, 3)
    assert out["data"] == full[:300, :451].reshape(-1).tolist()
