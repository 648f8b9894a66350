"""``wai-dispatch encode``'s refusals (docs/encode.md): each one typed line, exit 2, decided before
the analysis runs, so none needs torch — a picture over the set's limits (from its header,
naming the limit; a few bytes claiming 5000×5000 are never decoded), one over the service's
decode limits (lifted by ``--no-limits``), not a picture, truncated pixels, an unknown set, a
checkpoint that is not the set's, no checkpoint at hand, a set of another capability, a
capability without an encoder, and no torch; and the checkpoint a researcher's own set records
taken (verified, or unverified and said); ``encode --help``. The round trips are
tests/tools/test_encode.py (the tools extra)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import blake3
import numpy as np
import pytest
from PIL import Image

from wai_dispatch.cli.flags import EXIT_USAGE
from wai_dispatch.cli.main import main
from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.tools import encoder as encoder_module
from wai_dispatch.tools.encoder import resolve_checkpoint

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "conformance" / "weights" / "bmshj2018-demo-q3.pt"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def png(tmp_path: Path) -> Path:
    path = tmp_path / "p.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype="uint8")).save(path)
    return path


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *argv: str) -> tuple[int, str, str]:
    try:
        status = main([*argv, "--data-dir", str(data_dir)])
    except SystemExit as exc:
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def refused(err: str, code: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"wai-dispatch: error: {code}: "), err
    return lines[0]


def test_a_picture_over_the_set_limits_is_refused_from_its_header(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    bomb = tmp_path / "bomb.ppm"
    bomb.write_bytes(b"P6\n5000 5000\n255\n" + b"\0" * 64)  # 75 MB of pixels claimed, 80 bytes
    out = tmp_path / "e.json"
    status, _, err = run(capsys, data_dir, "encode", str(bomb), "-o", str(out), "--no-limits")
    assert status == EXIT_USAGE and not out.exists()
    line = refused(err, "picture_over_limits")
    assert "5000×5000" in line and "max_latent_height×max_latent_width = 256×256" in line


def test_the_service_limits_hold_unless_lifted(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    png: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WAI_MAX_LATENT_ELEMENTS", "100")  # the 40×56 picture's latent: 1728
    out = tmp_path / "e.json"
    status, _, err = run(capsys, data_dir, "encode", str(png), "-o", str(out))
    line = refused(err, "picture_over_limits")
    assert status == EXIT_USAGE and "max_latent_elements=100" in line and "--no-limits" in line
    # lifted: the refusal that follows is a later one (no torch here), not the limit
    monkeypatch.setitem(sys.modules, "torch", None)
    status, _, err = run(capsys, data_dir, "encode", str(png), "-o", str(out), "--no-limits")
    refused(err, "tools_missing")


def _saved(kind: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 16)).save(buf, format=kind)
    return buf.getvalue()


@pytest.mark.parametrize(
    "data",
    [b"not a picture at all", _saved("GIF"), _saved("BMP"), b""],
    ids=["text", "gif", "bmp", "empty"],  # GIF and BMP: real pictures of formats not taken
)
def test_not_a_picture(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "x.png"
    path.write_bytes(data)
    status, _, err = run(capsys, data_dir, "encode", str(path), "-o", str(tmp_path / "e.json"))
    assert status == EXIT_USAGE
    refused(err, "picture_invalid")


def test_truncated_pixels(
    capsys: pytest.CaptureFixture[str], data_dir: Path, png: Path, tmp_path: Path
) -> None:
    cut = tmp_path / "cut.png"
    cut.write_bytes(png.read_bytes()[:200])
    status, _, err = run(capsys, data_dir, "encode", str(cut), "-o", str(tmp_path / "e.json"))
    assert status == EXIT_USAGE
    assert "a PNG cut short" in refused(err, "picture_invalid")


def test_unknown_set(
    capsys: pytest.CaptureFixture[str], data_dir: Path, png: Path, tmp_path: Path
) -> None:
    status, _, err = run(
        capsys, data_dir, "encode", str(png), "--set", "ffff", "-o", str(tmp_path / "e.json")
    )
    assert status == EXIT_USAGE
    refused(err, "set_not_installed")


def test_a_checkpoint_that_is_not_the_sets(
    capsys: pytest.CaptureFixture[str], data_dir: Path, png: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.pt"
    data = CHECKPOINT.read_bytes()
    other.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit changed
    status, _, err = run(
        capsys,
        data_dir,
        "encode",
        str(png),
        "--checkpoint",
        str(other),
        "-o",
        str(tmp_path / "e.json"),
    )
    assert status == EXIT_USAGE
    line = refused(err, "encode_checkpoint_mismatch")
    assert "bmshj2018-demo-q3.pt with blake3 1a464687c392ffdb" in line


def test_no_checkpoint_at_hand(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    png: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(encoder_module, "weights_dir", lambda: tmp_path)  # as in a wheel
    status, _, err = run(capsys, data_dir, "encode", str(png), "-o", str(tmp_path / "e.json"))
    assert status == EXIT_USAGE
    assert "--checkpoint FILE" in refused(err, "encode_checkpoint_required")


def test_a_capability_without_an_encoder(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    png: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(encoder_module.ENCODERS, "wai.neural.int_synth")
    status, _, err = run(
        capsys,
        data_dir,
        "encode",
        str(png),
        "--capability",
        "wai.neural.int_synth",
        "-o",
        str(tmp_path / "e.json"),
        "--json",
    )
    assert status == EXIT_USAGE
    assert json.loads(err)["error"]["code"] == "encode_unsupported"


def test_no_torch_names_the_extra(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    png: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails
    out = tmp_path / "e.json"
    status, _, err = run(capsys, data_dir, "encode", str(png), "-o", str(out))
    assert status == EXIT_USAGE and not out.exists()
    assert "pip install 'wai-dispatch[tools]'" in refused(err, "tools_missing")


def test_picture_from_stdin_too_large(
    capsys: pytest.CaptureFixture[str],
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (4100, 8)).save(buf, format="PNG")  # small file, over 4096 wide
    stdin: Any = type("In", (), {"buffer": io.BytesIO(buf.getvalue())})()
    monkeypatch.setattr(sys, "stdin", stdin)
    status, _, err = run(capsys, data_dir, "encode", "-", "-o", str(tmp_path / "e.json"))
    assert status == EXIT_USAGE
    assert "4100×8" in refused(err, "picture_over_limits")


def test_a_set_of_another_capability(
    capsys: pytest.CaptureFixture[str], data_dir: Path, png: Path, tmp_path: Path
) -> None:
    status, _, err = run(
        capsys,
        data_dir,
        "encode",
        str(png),
        "--set",
        "847953aa",
        "--capability",
        "wai.neural.bmshj2018",
        "-o",
        str(tmp_path / "e.json"),
    )
    assert status == EXIT_USAGE
    assert "is of wai.neural.int_synth" in refused(err, "set_capability_mismatch")


def _set_recording(weights: dict[str, Any]) -> LoadedSet:
    usage = json.dumps({"format": "wai-usage/1", "weights": weights}).encode()
    return LoadedSet.from_files({"wai-usage.json": usage}, name="mine")


def test_the_checkpoint_a_set_records_is_taken_and_said(tmp_path: Path) -> None:
    """A researcher's own set (make-set --checkpoint records the file's BLAKE3): that file is
    taken, verified; a set that records no digest takes one unverified, and says so."""
    mine = tmp_path / "model.pt"
    mine.write_bytes(b"weights of mine")
    digest = blake3.blake3(mine.read_bytes()).hexdigest()
    chosen = resolve_checkpoint(_set_recording({"checkpoint": "model.pt", "blake3": digest}), mine)
    assert chosen.verified and chosen.blake3 == digest and chosen.data == b"weights of mine"
    zoo = _set_recording({"source": "compressai.zoo.bmshj2018_factorized(quality=3)"})
    unverified = resolve_checkpoint(zoo, mine)
    assert not unverified.verified and "records no checkpoint digest" in unverified.note
    with pytest.raises(WaiError) as missing:
        resolve_checkpoint(zoo, None)
    assert missing.value.code == "encode_checkpoint_required"
    # a set written from a renamed copy of the demo weights: they are found by their digest
    demo = blake3.blake3(CHECKPOINT.read_bytes()).hexdigest()
    copy = resolve_checkpoint(_set_recording({"checkpoint": "model.pt", "blake3": demo}), None)
    assert copy.verified and copy.path == CHECKPOINT.resolve()


def test_help_has_an_example_and_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["encode", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "example:\n  wai-dispatch encode picture.png -o envelope.json" in out
    for option in ("--set", "--checkpoint", "--intent", "--format", "--no-limits", "-o"):
        assert option in out
