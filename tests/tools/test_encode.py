"""``encode`` → ``decode`` through the real decoder for every bundled capability (docs/encode.md):
the decode reads exactly the symbols the encoder quantized, the picture comes back above a
stated PSNR floor, the integer decode is the same bit for bit twice, the quantization is
CompressAI's own (its ``net.compress()`` strings hold the same symbols), and the bundled
sample payload is reproduced from the picture it was coded from (the float analysis pinned
everywhere but where float error can flip a rounding)."""

from __future__ import annotations

import io
from pathlib import Path
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
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from wai_dispatch.codec import payload as codec_payload  # noqa: E402
from wai_dispatch.codec.compressai_rans import decode_string  # noqa: E402
from wai_dispatch.codec.envelope import parse  # noqa: E402
from wai_dispatch.codec.tables import tables_of  # noqa: E402
from wai_dispatch.tools import analysis_strips, encode_factorized  # noqa: E402
from wai_dispatch.tools.encoder import encode, pad, resolve_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "conformance" / "sets" / "bmshj2018-demo-q3"
FLOAT = "wai.neural.bmshj2018"
INT = "wai.neural.int_synth"
HYPER = "wai.neural.bmshj2018_hyperprior"
#: The hyperprior's analysis runs in exact arithmetic (tools/hyperprior_encode.py), so its
#: payload for the 130×100 crop is pinned whole, on every CPU.
HYPER_SYMBOLS = "4bd27d187feed78960d81323be6dd0873e559317993e3f72d9c2896f852c585c"
HYPER_PAYLOAD = "2721a9ad4332312d2cdccc5352c8d0a1aa3e9b62077ead5dac7bf68c8be9eeda"
#: The same payload as version 1 (no picture field): the pin before the picture's size travelled.
HYPER_PAYLOAD_V1 = "7514467033b3fdd5696a611bbc35967d5c57a382850f5f288da5de1d7182920b"
#: The decoded picture's PSNR over the input's own pixels (RGB8), at least; the earlier demo
#: weights measured 29.7 dB (float) and 29.6 dB (integer) on this 130×100 crop of coffee.
PSNR_FLOOR_DB = 26.0
#: How near a half an analysis value may sit for float error (another CPU's convolution) to
#: round it the other way; the pin below allows a different symbol only there.
TIE_BAND = 1e-3


def _png(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def _coffee(top: int, left: int, height: int, width: int) -> np.ndarray:
    from skimage.data import coffee  # the tools extra; bundled with scikit-image

    out: np.ndarray = coffee()[top : top + height, left : left + width]
    return np.ascontiguousarray(out)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def picture() -> np.ndarray:
    # 130×100: neither side a multiple of 16, so the padding is exercised (coded 144×112)
    return _coffee(120, 200, 100, 130)


def _round_trip(decoder: Any, picture: np.ndarray, capability: str, **kw: Any) -> tuple[Any, Any]:
    set_digest = decoder.set_store.default_for(capability).digest
    result = encode(decoder, _png(picture), set_digest=set_digest, **kw)
    envelope = parse(result.envelope.to_cbor())  # through the wire form
    return result, decoder.decode(envelope)


def test_float_round_trip(decoder: Any, picture: np.ndarray) -> None:
    result, decoded = _round_trip(decoder, picture, FLOAT)
    assert result.picture_size == (130, 100) and result.coded_size == (144, 112)
    assert result.latent_shape == (1, 192, 7, 9)
    # the decoder's entropy stage reads exactly the symbols the encoder quantized
    assert decoded.symbols_digest == result.symbols_digest
    assert decoded.set_digest == result.set_digest
    assert decoded.reports[-1].ran is not None
    # the payload carries the picture's own size (version 2): the decode is cropped to it
    assert (decoded.width, decoded.height) == result.picture_size
    assert _psnr(decoded.rgb, picture) >= PSNR_FLOOR_DB
    # the pin the envelope carries is its set's
    assert [p.set for p in result.envelope.pins] == [result.set_digest]


def test_symbols_are_what_the_payload_decodes_to(decoder: Any, picture: np.ndarray) -> None:
    set_digest = decoder.set_store.default_for(FLOAT).digest
    result = encode(decoder, _png(picture), set_digest=set_digest)
    tables = tables_of(decoder.opened.loaded(set_digest))
    symbols = codec_payload.decode(result.envelope.payload, tables)
    np.testing.assert_array_equal(symbols, result.symbols)


def test_int_synth_round_trip_is_bit_identical(decoder: Any, picture: np.ndarray) -> None:
    result, first = _round_trip(decoder, picture, INT, intent="replicate")
    assert result.envelope.intent == "replicate" and result.notes == ()
    assert first.symbols_digest == result.symbols_digest
    ran = first.reports[-1].ran
    assert ran is not None and str(ran.path) == "cpu/wai-ops/integer"
    assert str(ran.tier) == "decode-equivalence"
    second = decoder.decode(parse(result.envelope.to_json()))
    assert second.rgb_digest == first.rgb_digest
    assert _psnr(first.rgb, picture) >= PSNR_FLOOR_DB
    # the integer set codes the same symbols as the float set it was derived from
    float_result = encode(
        decoder, _png(picture), set_digest=decoder.set_store.default_for(FLOAT).digest
    )
    assert float_result.envelope.payload == result.envelope.payload


#: A strip budget of a few latent rows for the crops here (tools/analysis_strips.py): the
#: analyses then run in several strips, each with its halo, and must give the same bytes.
FEW_ROWS = 1 << 19


@pytest.mark.parametrize("budget", [None, FEW_ROWS])
def test_hyperprior_round_trip_holds_entropy_consistency(
    decoder: Any, picture: np.ndarray, budget: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import blake3

    if budget is not None:  # 192×128 coded, 8 latent rows: 4 strips of 2
        monkeypatch.setattr(analysis_strips, "ACTIVATION_BYTES", budget)
    result, decoded = _round_trip(decoder, picture, HYPER)
    assert result.coded_size == (192, 128) and result.latent_shape == (1, 192, 8, 12)
    # the digest covers z's symbols then y's, as the decoder's entropy stage reports it
    assert (result.symbols_digest, decoded.symbols_digest) == (HYPER_SYMBOLS, HYPER_SYMBOLS)
    payload = result.envelope.payload
    assert blake3.blake3(payload).hexdigest() == HYPER_PAYLOAD
    assert payload[4] == 2 and payload[24:32] == (130).to_bytes(4, "little") + (100).to_bytes(
        4, "little"
    )
    v1 = payload[:4] + b"\x01" + payload[5:24] + payload[32:]
    assert blake3.blake3(v1).hexdigest() == HYPER_PAYLOAD_V1
    assert (decoded.width, decoded.height) == (130, 100)
    ran = decoded.reports[-1].ran
    assert ran is not None and str(ran.tier) == "entropy-consistency"
    assert _psnr(decoded.rgb, picture) >= PSNR_FLOOR_DB


def test_quantization_is_compressais(decoder: Any, picture: np.ndarray) -> None:
    """CompressAI's own ``compress`` of the same padded picture, same torch, same process:
    its string holds exactly our symbols."""
    from wai_dispatch.tools.train_bmshj2018 import load_checkpoint

    files = decoder.opened.loaded(decoder.set_store.default_for(FLOAT).digest)
    checkpoint = resolve_checkpoint(files, None)
    net = load_checkpoint(checkpoint.path)
    padded = pad(picture, 16)
    x = torch.from_numpy(padded.copy()).permute(2, 0, 1)[None].float() / 255
    with torch.no_grad():
        out = net.compress(x)
    tables = tables_of(files)
    theirs = decode_string(out["strings"][0][0], tables, (192, *out["shape"]))[None]
    result = encode(decoder, _png(picture), set_digest=files.digest)
    np.testing.assert_array_equal(result.symbols, theirs)


@pytest.mark.parametrize("budget", [None, FEW_ROWS])
def test_the_bundled_sample_is_reproduced(
    decoder: Any, budget: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundled set's payload was coded (CompressAI, conformance/sets/…/payload.json) from
    a 256×256 crop of skimage's coffee; encode reproduces its symbols wherever the analysis
    value is not within float error of a tie, and its bytes when no symbol differs — in one
    strip and in several (the budget: 4 latent rows a strip, 4 strips)."""
    if budget is not None:
        monkeypatch.setattr(analysis_strips, "ACTIVATION_BYTES", budget)
    files = decoder.opened.loaded(decoder.set_store.default_for(FLOAT).digest)
    crop = _coffee(45, 167, 256, 256)
    bundled = (BUNDLED / "payload.bin").read_bytes()
    tables = tables_of(files)
    expected = codec_payload.decode(bundled, tables)
    assert codec_payload.encode(expected, tables) == bundled  # the writer, pinned on any CPU
    y = encode_factorized.analysis(resolve_checkpoint(files, None), files, crop)
    diff = y - tables.medians[None, :, None, None]
    near_tie = np.abs(np.abs(diff - np.floor(diff)) - 0.5) < TIE_BAND
    result = encode(decoder, _png(crop), set_digest=files.digest)
    differs = result.symbols != expected
    assert not np.any(differs & ~near_tie)
    if not differs.any():
        assert result.envelope.payload == bundled
        assert (
            result.symbols_digest
            == "09c6186a09fd0e7b795a2c99c0594dbfaafadfc0f47af871a26e32bfdfbe5c44"
        )


def test_cli_stdin_to_stdout(
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    picture: np.ndarray,
) -> None:
    """``encode - -o -``: the picture from stdin, the envelope (and only it) on stdout, the
    summary on stderr; no file named ``-``."""
    import sys

    from wai_dispatch.cli.main import main

    stdin: Any = type("In", (), {"buffer": io.BytesIO(_png(picture))})()
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.chdir(tmp_path)
    status = main(
        [
            "encode",
            "-",
            "-o",
            "-",
            "--format",
            "cbor",
            "--intent",
            "replicate",
            "--capability",
            INT,
            "--data-dir",
            str(tmp_path / "data"),
        ]
    )
    out, err = capsysbinary.readouterr()
    assert status == 0 and not (tmp_path / "-").exists()
    envelope = parse(out)
    assert envelope.capability == INT and envelope.intent == "replicate"
    assert b"wrote - (cbor): wai.neural.int_synth, 130\xc3\x97100, padded to 144\xc3\x97112" in err


def test_replicate_of_a_float_capability_is_written_with_a_note(
    decoder: Any, picture: np.ndarray
) -> None:
    """A float capability's replicate envelope is valid (the bundled replicate sample is one)
    but no path decodes it: the encoder writes it and says so."""
    from wai_dispatch.service.decoding.results import NoPath

    set_digest = decoder.set_store.default_for(FLOAT).digest
    small = np.ascontiguousarray(picture[:16, :16])
    result = encode(decoder, _png(small), set_digest=set_digest, intent="replicate")
    assert result.notes and "no path decodes a replicate envelope" in result.notes[0]
    with pytest.raises(NoPath) as refused:
        decoder.decode(result.envelope)
    assert all(r.ran is None for r in refused.value.reports)


def test_cli_progress_on_a_terminal_only(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    picture: np.ndarray,
) -> None:
    """``encode`` draws its progress (the hyperprior's analysis, stage by stage and strip by
    strip) on standard error when it is a terminal, and not under ``--json``."""
    from wai_dispatch.cli import progress
    from wai_dispatch.cli.main import main

    source = tmp_path / "p.png"
    source.write_bytes(_png(picture))
    monkeypatch.setattr(progress, "on_tty", lambda stream: True)
    monkeypatch.setattr(analysis_strips, "ACTIVATION_BYTES", FEW_ROWS)  # a few strips
    common = ["--capability", HYPER, "--data-dir", str(tmp_path / "data")]
    assert main(["encode", str(source), "-o", str(tmp_path / "a.json"), *common]) == 0
    err = capsys.readouterr().err
    assert "\rencode [" in err and "g_a, strip 2/" in err and "entropy coding" in err, err
    assert err.count("\r\x1b[K") >= 1  # cleared before the summary
    assert main(["encode", str(source), "-o", str(tmp_path / "b.json"), "--json", *common]) == 0
    quiet = capsys.readouterr()
    assert "\r" not in quiet.err and "\x1b" not in quiet.err
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_a_grid_the_exact_pass_does_not_confirm_is_corrected(
    decoder: Any, picture: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hyperprior's grids come from a float32 pass's peaks; with those peaks made twice
    what they are, every grid after the first is wrong, and the exact pass corrects them,
    one layer at a time, to the pinned payload."""
    import blake3

    rows = analysis_strips.TorchLayer.rows

    def doubled(self: Any, *args: Any) -> Any:
        out = rows(self, *args)
        self.peak *= 2.0
        return out

    passes: list[int] = []
    run = analysis_strips.run

    def counted(*args: Any, **kw: Any) -> None:
        passes.append(1)
        run(*args, **kw)

    monkeypatch.setattr(analysis_strips.TorchLayer, "rows", doubled)
    monkeypatch.setattr(analysis_strips, "run", counted)
    set_digest = decoder.set_store.default_for(HYPER).digest
    result = encode(decoder, _png(picture), set_digest=set_digest)
    assert blake3.blake3(result.envelope.payload).hexdigest() == HYPER_PAYLOAD
    assert len(passes) >= 3  # the float pass, a wrong exact pass, at least one more


@pytest.mark.slow
def test_encode_memory_does_not_grow_with_the_picture(tmp_path: Path) -> None:
    """A 2048×2048 encode (the factorized set) in its own process peaks well below what its
    whole activations would take (2.8 GB resident before the strips, 0.9 GB after, here):
    the analysis holds one strip of rows at a time."""
    import subprocess
    import sys

    rng = np.random.default_rng(39)
    rows = np.linspace(0, 255, 2048)
    rgb = np.stack(
        [np.add.outer(rows, rows) / 2, np.add.outer(rows, -rows) % 256, rows[:, None] + 0 * rows],
        -1,
    )
    rgb = np.clip(rgb + rng.normal(0, 8, rgb.shape), 0, 255).astype(np.uint8)
    source = tmp_path / "big.png"
    Image.fromarray(rgb).save(source)
    command = [
        sys.executable,
        "-m",
        "wai_dispatch",
        "encode",
        str(source),
        "-o",
        str(tmp_path / "big.json"),
        "--data-dir",
        str(tmp_path / "data"),
        "--json",
    ]
    # The encode runs under a small Python that reports its child's peak: a child of the test
    # process itself would report at least that process's own resident set (Linux keeps the
    # parent's high-water mark across a vfork and exec), gigabytes late in a full run.
    probe = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.split()[-1]) * 1024  # KiB on Linux
    assert peak < 1.5 * (1 << 30), f"the encode peaked at {peak / (1 << 30):.2f} GiB"
