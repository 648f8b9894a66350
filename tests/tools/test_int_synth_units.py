"""The integer set writer's ``int8-units`` profile (tools/int_synth_ptq.py, issue 38): one int8
digit per weight and one 7-bit plane per convolution input past the first, so the int8 graph
engine computes one int8 product a multiply-accumulate wherever the proof allows it on every
kernel; its program pinned on one calibration crop (fast) and as the whole set (slow), the
bundled set (fast: its digest; slow: the writer's output byte for byte), and what
``int_synth_quality`` reports of it and of the retired set it replaced."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from _thirdparty import import_or_skip
from blake3 import blake3

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: [__import__(m) for m in ("compressai", "onnx", "onnxruntime")],
    "torch",
    "compressai",
    "onnx",
    "onnxruntime",
    reason="the tools extra (torch, CompressAI) and ONNX Runtime",
)

from wai_dispatch.codec.sets import Manifest  # noqa: E402
from wai_dispatch.conformance import retired_dir, sets_dir  # noqa: E402
from wai_dispatch.paths.waiops.load import load_program  # noqa: E402
from wai_dispatch.tools import int_synth_ptq  # noqa: E402
from wai_dispatch.tools import wai_int_synth_set as writer  # noqa: E402
from wai_dispatch.tools.bmshj2018_model import load_model  # noqa: E402
from wai_dispatch.tools.int_synth_quality import Units, int8_units  # noqa: E402
from wai_dispatch.tools.train_bmshj2018 import TRAIN_IMAGES  # noqa: E402

FLOAT = sets_dir() / "bmshj2018-demo-q3"
BUNDLED = sets_dir() / "int-synth-int8-units-demo-q3"
RETIRED = retired_dir() / "int-synth-demo-q3"
PROFILE = int_synth_ptq.PROFILES["int8-units"]
#: The program (JSON and weights) from one crop of the first training picture.
ONE_CROP = "96fc372c3e699172816efef9f93f553bf091da43a970962ec9f4cbde1f08651a"
#: The whole set the writer gives with ``--profile int8-units`` from the bundled float set: the
#: bundled integer set.
SET_DIGEST = "847953aadf96023c0d0f3bc2790eb8983cf051fb9e7c8286b703ff4e3b533c33"


def _one_plane(program_units: list[Units]) -> None:
    units = {u.name: u for u in program_units}
    assert sorted(units) == ["deconv1", "deconv2", "deconv3", "deconv4"]
    assert all(u.digits == 1 for u in units.values())
    assert all(all(u.kernels.values()) for u in units.values())
    # the latent at 1/16 needs two planes; every other convolution reads one
    assert units["deconv1"].planes == 2
    assert [units[f"deconv{i}"].planes for i in (2, 3, 4)] == [1, 1, 1]
    assert [units[f"deconv{i}"].per_mac for i in (2, 3, 4)] == [1.0, 1.0, 1.0]
    assert all(max(-lo, hi) <= 127 for lo, hi in (u.weights for u in units.values()))


def test_one_crop_gives_the_pinned_one_plane_program() -> None:
    weights = writer.float_weights(FLOAT)
    model, _ = load_model(checkpoint=None, pretrained=False, quality=3)
    stats, _ = writer.calibrate(
        model, weights, lambda _m: None, TRAIN_IMAGES[:1], crops=1, quantile=PROFILE.clip
    )
    tables = (FLOAT / "cdfs_q3.json").read_bytes()
    medians = np.array(json.loads(tables)["medians"], dtype=np.float32)
    b, _ = int_synth_ptq.quantise(weights, stats, medians, writer.symbol_range(tables), PROFILE)
    program_json, blob = b.program_json("x4", 3), b.weights()
    program = load_program(program_json, blob, rgb8_output=True)
    assert program.float32_exact
    _one_plane(int8_units(program))
    assert hashlib.sha256(program_json + blob).hexdigest() == ONE_CROP


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def test_the_bundled_set_is_the_pinned_one_plane_set() -> None:
    manifest = Manifest.from_bytes((BUNDLED / "set.json").read_bytes())
    assert (manifest.name, manifest.digest) == ("int-synth-int8-units-demo-q3", SET_DIGEST)
    listed = json.loads((BUNDLED / "set.json").read_bytes())["files"]
    assert {n: blake3(d).hexdigest() for n, d in _files(BUNDLED).items() if n != "set.json"} == {
        n: f["blake3"] for n, f in listed.items()
    }
    program = load_program(
        (BUNDLED / writer.PROGRAM_FILE).read_bytes(),
        (BUNDLED / writer.WEIGHTS_FILE).read_bytes(),
        rgb8_output=True,
    )
    assert program.float32_exact
    _one_plane(int8_units(program))


def test_the_retired_program_needs_two_planes_and_two_digits() -> None:
    program = load_program(
        (RETIRED / writer.PROGRAM_FILE).read_bytes(),
        (RETIRED / writer.WEIGHTS_FILE).read_bytes(),
        rgb8_output=True,
    )
    units = {u.name: u for u in int8_units(program)}
    assert [units[f"deconv{i}"].planes for i in range(1, 5)] == [2, 2, 2, 2]
    assert [units[f"deconv{i}"].digits for i in range(1, 5)] == [2, 2, 2, 1]
    assert all(u.per_mac >= 2.0 for u in units.values())


@pytest.mark.slow
def test_the_writer_gives_the_pinned_int8_units_set(tmp_path: Path) -> None:
    out = tmp_path / "set"
    argv = ["--out", str(out), "--from", str(FLOAT), "--profile", "int8-units"]
    assert writer.main(argv) == 0
    manifest = Manifest.from_bytes((out / "set.json").read_bytes())
    assert manifest.name == "int-synth-int8-units-demo-q3"
    facts = manifest.facts.to_json()["quantisation"]
    assert facts["profile"] == {"int8-units": vars(PROFILE)}
    assert facts["activation_bits"] == 8
    program = load_program(
        (out / writer.PROGRAM_FILE).read_bytes(),
        (out / writer.WEIGHTS_FILE).read_bytes(),
        rgb8_output=True,
    )
    _one_plane(int8_units(program))
    assert manifest.digest == SET_DIGEST
    written, bundled = _files(out), _files(BUNDLED)
    assert sorted(written) == sorted(bundled)
    assert [n for n in bundled if written[n] != bundled[n]] == []
