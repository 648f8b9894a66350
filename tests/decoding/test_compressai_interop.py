"""Interoperability with CompressAI itself (docs/interop.md): its own rANS strings read exactly,
and `wai-dispatch import-compressai` decoding held-out natural images to CompressAI's symbols
and within 0.5/255 RMS of its reconstruction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wai_dispatch.cli.main import main
from wai_dispatch.codec.compressai_rans import (
    CompressAIStreamError,
    decode_string,
    dump_compressed,
    load_compressed,
)
from wai_dispatch.codec.tables import laplacian_tables


def test_load_compressed_refuses_what_is_not_one_string() -> None:
    ok = dump_compressed([[b"\0" * 8]], (2, 3), model="m", quality=3)
    assert load_compressed(ok)[1] == (2, 3)
    for bad in (
        b"not json",
        json.dumps({"format": "other"}).encode(),
        ok.replace(b'"shape": [\n  2,\n  3\n ]', b'"shape": [0, 3]'),
        dump_compressed([[b"a", b"b"]], (2, 3), model="m", quality=3),
        ok.replace(b"AAAA", b"A!AA"),
    ):
        with pytest.raises(CompressAIStreamError):
            load_compressed(bad)


def test_decode_string_refuses_torn_streams() -> None:
    tables = laplacian_tables(4, seed=1)
    with pytest.raises(CompressAIStreamError, match="channels"):
        decode_string(b"\0" * 8, tables, (5, 1, 1))
    with pytest.raises(CompressAIStreamError, match="32-bit words"):
        decode_string(b"\0" * 10, tables, (4, 1, 1))
    # A state that does not return to its initial value is not a whole stream.
    with pytest.raises(CompressAIStreamError):
        decode_string(b"\xff" * 8, tables, (4, 2, 2))


def test_decode_string_refuses_bypass_values_outside_int32() -> None:
    """CompressAI's bypass values are int32 (at most eight 4-bit groups): a string read against
    the wrong tables that asks for more is compressai_stream_invalid, not OverflowError."""
    tables = laplacian_tables(1, seed=0, escape_mass=0.9)
    wrong = bytes.fromhex("bbe28e863a36aea53166de41f0e0899d651a99c333b138621af5fe757d2649ff")
    with pytest.raises(CompressAIStreamError, match="int32"):
        decode_string(wrong, tables, (1, 1, 4))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.binary(min_size=8, max_size=64).map(lambda b: b[: len(b) // 4 * 4]))
def test_decode_string_any_bytes_is_symbols_or_typed_error(data: bytes) -> None:
    """Whatever the bytes, against escape-heavy tables: symbols or compressai_stream_invalid."""
    tables = laplacian_tables(2, seed=3, escape_mass=0.9)
    try:
        out = decode_string(data, tables, (2, 1, 3))
    except CompressAIStreamError:
        return
    assert out.dtype == np.int32 and out.shape == (2, 1, 3)


# --- against CompressAI itself (tools extra) ------------------------------------------------


@pytest.fixture(scope="module")
def compressai_eb():  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch", reason="needs the tools extra (torch)")
    import compressai

    torch.manual_seed(7)
    eb = compressai.entropy_models.EntropyBottleneck(24)
    with torch.no_grad():  # give the untrained bottleneck a spread like a trained one's
        eb.quantiles[:, 0, :] = torch.tensor([-6.0, 0.25, 6.0])
    eb.update(force=True)
    return torch, eb


@pytest.mark.tools
def test_reads_compressai_strings_exactly_including_escapes(compressai_eb) -> None:  # type: ignore[no-untyped-def]
    torch, eb = compressai_eb
    from wai_dispatch.codec.tables import EntropyTables

    tables = EntropyTables.from_compressai(
        eb._quantized_cdf, eb._cdf_length, eb._offset, eb.quantiles[:, 0, 1]
    )
    y = torch.randn(1, 24, 8, 12, generator=torch.Generator().manual_seed(3)) * 9
    strings = eb.compress(y)
    symbols = decode_string(strings[0], tables, (24, 8, 12))
    reference = eb.decompress(strings, (8, 12)).numpy()[0]
    latent = symbols.astype(np.float32) + tables.medians[:, None, None]
    assert np.array_equal(latent, reference)
    escaped = (symbols < tables.offsets[:, None, None]) | (
        symbols > (tables.offsets + tables.cdf_lengths - 3)[:, None, None]
    )
    assert escaped.sum() > 20  # the stream really carried bypass-coded values


HELD_OUT = ("chelsea", "coffee")  # tools/train_bmshj2018.py holds these out of training


@pytest.fixture(scope="module")
def demo_net():  # type: ignore[no-untyped-def]
    pytest.importorskip("torch", reason="needs the tools extra (torch)")
    from wai_dispatch.conformance import weights_dir
    from wai_dispatch.tools.bmshj2018_model import load_model

    checkpoint = weights_dir() / "bmshj2018-demo-q3.pt"
    return load_model(checkpoint=checkpoint, pretrained=False, quality=3)[0]


@pytest.mark.tools
@pytest.mark.parametrize("image", HELD_OUT)
@pytest.mark.slow
def test_import_compressai_matches_net_decompress(
    image: str, demo_net, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    import skimage.data
    import torch

    from wai_dispatch.codec.envelope import parse
    from wai_dispatch.service.decoding.decoder import Decoder

    net = demo_net
    picture = getattr(skimage.data, image)()
    h, w = (picture.shape[0] // 16) * 16, (picture.shape[1] // 16) * 16
    x = torch.from_numpy(picture[:h, :w].copy()).permute(2, 0, 1)[None].float() / 255.0
    torch.set_num_threads(2)
    with torch.no_grad():
        out = net.compress(x)
        reference = net.decompress(out["strings"], out["shape"])
    compressed = tmp_path / f"{image}.compressai.json"
    compressed.write_bytes(
        dump_compressed(
            out["strings"], tuple(out["shape"]), model="bmshj2018-factorized", quality=3
        )
    )
    data = tmp_path / "data"
    envelope_path = tmp_path / f"{image}.json"
    assert (
        main(
            [
                "import-compressai",
                str(compressed),
                "-o",
                str(envelope_path),
                "--data-dir",
                str(data),
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)

    from wai_dispatch.dispatch import REFERENCE_OFFER

    decoder = Decoder.assemble(data, REFERENCE_OFFER)
    envelope = parse(envelope_path.read_bytes())
    result = decoder.decode(envelope)
    assert result.reports[0].ran is not None
    assert str(result.reports[0].ran.path) == "cpu/onnx-runtime/float"

    # The same symbols: our latent is CompressAI's, exactly.
    from wai_dispatch.codec import payload
    from wai_dispatch.codec.tables import EntropyTables

    set_files = decoder.opened.loaded(result.set_digest)
    tables = EntropyTables.from_json(set_files.read(str(set_files.facts.tables)))
    symbols = payload.decode(envelope.payload, tables)
    with torch.no_grad():
        y_hat = net.entropy_bottleneck.decompress(out["strings"][0], out["shape"]).numpy()
    assert np.array_equal(payload.latent(symbols, tables), y_hat)
    assert summary["symbols_digest"] == result.part.symbols_digest

    # The reconstruction: within 0.5/255 RMS of CompressAI's x_hat.
    theirs = reference["x_hat"].clamp(0, 1)[0].permute(1, 2, 0).numpy().astype(np.float64)
    ours = result.rgb.astype(np.float64) / 255.0
    rms = float(np.sqrt(np.mean((ours - theirs) ** 2)))
    assert ours.shape == theirs.shape
    assert rms <= 0.5 / 255, f"{image}: RMS {rms * 255:.3f}/255"
