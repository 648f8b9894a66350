"""Issue 18: the estimate counts one tile of activations, not the whole picture's (so a
4096×4096 decode fits the default memory budget), and the decoded PNG's zlib level is the
``png_level`` setting (1 by default)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from wai_dispatch.codec.envelope import parse
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.paths import tiling
from wai_dispatch.paths.waiops import choose
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.prepare import estimate_of
from wai_dispatch.service.settings import Settings, load

MiB = 1 << 20
SAMPLE = envelopes_dir() / "bmshj2018-demo-q3.json"
INT_SAMPLE = envelopes_dir() / "int-synth-int8-units-demo-q3.json"  # the wai-ops path's


def test_a_small_decode_is_estimated_as_before() -> None:
    """Below one tile the activations are the whole picture's: 64 MiB + 560 B per pixel."""
    est = estimate_of(192 * 16 * 16, 256 * 256, 256 * MiB)
    assert est.memory_bytes == 64 * MiB + 560 * 256 * 256


def test_a_4096_square_decode_fits_the_default_budget_and_limits() -> None:
    defaults = Settings.model_fields
    est = estimate_of(192 * 256 * 256, 4096 * 4096, defaults["tile_bytes"].default)
    assert est.memory_bytes == 64 * MiB + 256 * MiB + 40 * 4096 * 4096
    assert est.memory_bytes < defaults["memory_budget_bytes"].default
    assert est.latent_elements <= defaults["max_latent_elements"].default
    assert est.seconds <= defaults["decode_timeout_s"].default
    # untiled it would not: the activations grow with the picture
    assert estimate_of(0, 4096 * 4096, 1 << 50).memory_bytes > 8 << 30


def test_the_estimate_follows_the_tile_budget() -> None:
    assert estimate_of(0, 2048 * 2048, 64 * MiB).memory_bytes == 128 * MiB + 40 * 2048 * 2048
    assert estimate_of(0, 2048 * 2048).memory_bytes == (
        64 * MiB + tiling.DEFAULT_TILE_BYTES + 40 * 2048 * 2048
    )


@pytest.mark.parametrize("level", [0, 1, 9])
def test_the_png_level_is_the_setting(tmp_path: Path, level: int) -> None:
    decoder = Decoder.assemble(**load(data_dir=tmp_path / "data", png_level=level).decoder_args())
    assert decoder.png_level == level
    result = decoder.decode(parse(SAMPLE.read_bytes()))
    png = result.png()
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png))), result.rgb)
    sizes = {n: len(result.png(n)) for n in (0, 1, 9)}
    assert len(png) == sizes[level]
    assert sizes[0] > sizes[1] > sizes[9]


def test_png_level_is_validated() -> None:
    from wai_dispatch.service.settings import SettingsInvalid

    with pytest.raises(SettingsInvalid, match="png_level"):
        load(png_level=10)


def test_opening_a_decoder_changes_no_other_decoders_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoder A opened with WAI_TILE_BYTES=64 MiB keeps 64 MiB after B opens with 256 MiB:
    its estimates and its decodes' jobs carry its own budget, and B's carry B's."""
    monkeypatch.setenv("WAI_TILE_BYTES", str(64 * MiB))
    a = Decoder.assemble(**load(data_dir=tmp_path / "a").decoder_args())
    monkeypatch.setenv("WAI_TILE_BYTES", str(256 * MiB))
    b = Decoder.assemble(**load(data_dir=tmp_path / "b").decoder_args())
    assert (a.tile_bytes, b.tile_bytes) == (64 * MiB, 256 * MiB)
    envelope = parse(SAMPLE.read_bytes())
    pa, pb = a.prepare(envelope), b.prepare(envelope)
    assert (pa.tile_bytes, pb.tile_bytes) == (64 * MiB, 256 * MiB)
    jobs: list[int] = []
    for decoder in (a, b):
        real = decoder.job

        def job(*args: Any, real: Any = real) -> Any:
            made = real(*args)
            jobs.append(made.tile_bytes)
            return made

        monkeypatch.setattr(decoder, "job", job)
        decoder.decode(decoder.prepare(envelope))
    assert jobs == [64 * MiB, 256 * MiB]
    assert (a.cache_dir, b.cache_dir) == (tmp_path / "a/cache/onnx", tmp_path / "b/cache/onnx")


def test_opening_a_decoder_changes_no_other_decoders_waiops_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoder A assembled with WAI_WAIOPS_ENGINE=float32 still runs the wai-ops program on
    float32 after B is assembled with int8: each decode's job carries its decoder's engine
    to the adapter, which builds that one (paths/waiops/choose.py), and B's runs on int8."""
    monkeypatch.setenv("WAI_WAIOPS_ENGINE", "float32")
    a = Decoder.assemble(**load(data_dir=tmp_path / "a").decoder_args())
    monkeypatch.setenv("WAI_WAIOPS_ENGINE", "int8")
    b = Decoder.assemble(**load(data_dir=tmp_path / "b").decoder_args())
    assert (a.waiops_engine, b.waiops_engine) == ("float32", "int8")
    built: list[tuple[str, str]] = []
    real = choose.build

    def build(program: Any, where: str = "wai-ops", want: str = "auto") -> Any:
        runner = real(program, where, want)
        built.append((want, choose.engine_name(runner)))
        return runner

    monkeypatch.setattr(choose, "build", build)
    envelope = parse(INT_SAMPLE.read_bytes())
    pictures = []
    for decoder in (a, b, a):
        result = decoder.decode(envelope)
        ran = result.reports[-1].ran
        assert ran is not None and str(ran.path) == "cpu/wai-ops/integer"
        pictures.append(result.rgb.tobytes())
    # each decoder's own engine, built once each (A's second decode finds A's float32 engine)
    assert built == [("float32", "float32"), ("int8", "int8")]
    assert pictures[0] == pictures[1] == pictures[2]  # the engines agree bit for bit
