"""The picture's own size back (issue 30, item 3; docs/payload.md, version 2): ``encode`` of a
picture that is not a multiple of the analysis's stride writes a payload that carries its width
and height, and the decode is cropped to it — bit-identical to the top-left region of the decode
of the same symbols in a version-1 payload (the padded picture), for every capability that
encodes, whole and tiled."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: __import__("compressai"),
    "torch",
    "compressai",
    reason="the tools extra (torch, CompressAI)",
)

from PIL import Image  # noqa: E402

from wai_dispatch.codec import hyperprior_payload as waih  # noqa: E402
from wai_dispatch.codec import payload as waip  # noqa: E402
from wai_dispatch.codec.envelope import parse  # noqa: E402
from wai_dispatch.codec.tables import tables_of  # noqa: E402
from wai_dispatch.service.decoding.hyperprior import HyperStage  # noqa: E402
from wai_dispatch.tools.encoder import encode  # noqa: E402

WIDTH, HEIGHT = 451, 300


@pytest.fixture(scope="module")
def photo() -> bytes:
    from skimage.data import chelsea  # the tools extra; bundled with scikit-image

    rgb = np.ascontiguousarray(chelsea()[:HEIGHT, :WIDTH])
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def _padded_payload(decoder: Any, set_digest: str, payload: bytes) -> bytes:
    """The same symbols in a version-1 payload: the decode of the padded picture."""
    files = decoder.opened.loaded(set_digest)
    if payload[:4] == waih.MAGIC:
        stage = HyperStage.of(files)
        assert stage is not None
        header = waih.read_header(payload)
        z = waih.decode_z(payload, header, stage.z_tables)
        indexes = stage.indexes(z, decoder.limits)
        y = waih.decode_y(payload, header, indexes, stage.y_tables)
        return waih.encode(z, y, indexes, stage.z_tables, stage.y_tables)
    tables = tables_of(files)
    return waip.encode(waip.decode(payload, tables), tables)


@pytest.mark.parametrize(
    ("capability", "coded", "intent"),
    [
        ("wai.neural.bmshj2018", (464, 304), None),
        ("wai.neural.int_synth", (464, 304), "replicate"),
        ("wai.neural.bmshj2018_hyperprior", (512, 320), None),
    ],
)
def test_encode_then_decode_gives_the_pictures_own_size(
    decoder: Any, photo: bytes, capability: str, coded: tuple[int, int], intent: str | None
) -> None:
    set_digest = decoder.set_store.default_for(capability).digest
    result = encode(decoder, photo, set_digest=set_digest, intent=intent)
    assert result.picture_size == (WIDTH, HEIGHT) and result.coded_size == coded
    payload = result.envelope.payload
    assert payload[4] == 2  # version 2: the payload carries the picture
    decoded = decoder.decode(parse(result.envelope.to_cbor()))
    assert (decoded.width, decoded.height) == (WIDTH, HEIGHT)
    assert decoded.rgb.shape == (HEIGHT, WIDTH, 3)
    assert decoded.symbols_digest == result.symbols_digest
    padded = decoder.decode_payload(
        _padded_payload(decoder, set_digest, payload), capability=capability, set_digest=set_digest
    )
    assert (padded.width, padded.height) == coded
    assert padded.symbols_digest == decoded.symbols_digest
    np.testing.assert_array_equal(decoded.rgb, padded.rgb[:HEIGHT, :WIDTH])


def test_a_multiple_of_the_stride_keeps_version_1(decoder: Any) -> None:
    """A picture the padding leaves as it is: its payload is version 1, as before."""
    rgb = np.zeros((64, 48, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    result = encode(decoder, buf.getvalue(), set_digest=None)
    assert result.envelope.payload[4] == 1
    decoded = decoder.decode(result.envelope)
    assert (decoded.width, decoded.height) == (48, 64)


@pytest.mark.parametrize("capability", ["wai.neural.bmshj2018", "wai.neural.int_synth"])
@pytest.mark.slow
def test_a_tiled_decode_is_cropped_the_same(
    decoder: Any, photo: bytes, capability: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a tile budget of a few latent rows, the synthesis runs in tiles; the cropped decode
    is the tiled padded decode's top-left region, bit for bit."""
    from wai_dispatch.paths import tiling

    seen: list[int] = []
    real = tiling.run_tiled
    module = "onnx" if capability == "wai.neural.bmshj2018" else "waiops.adapter"

    def counting(*args: Any) -> Any:
        seen.append(len(args[2]))
        return real(*args)

    monkeypatch.setattr(f"wai_dispatch.paths.{module}.run_tiled", counting)
    set_digest = decoder.set_store.default_for(capability).digest
    intent = "replicate" if capability == "wai.neural.int_synth" else None
    result = encode(decoder, photo, set_digest=set_digest, intent=intent)
    budget = decoder.tile_bytes
    decoder.tile_bytes = 4 * 16 * 16 * 8 * 8  # windows of about 8×8 latent positions
    try:
        decoded = decoder.decode(parse(result.envelope.to_cbor()))
        payload = _padded_payload(decoder, set_digest, result.envelope.payload)
        padded = decoder.decode_payload(payload, capability=capability, set_digest=set_digest)
    finally:
        decoder.tile_bytes = budget
    assert seen and all(n > 1 for n in seen)
    assert (decoded.width, decoded.height) == (WIDTH, HEIGHT)
    np.testing.assert_array_equal(decoded.rgb, padded.rgb[:HEIGHT, :WIDTH])
