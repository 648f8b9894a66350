"""Tiled synthesis (paths/tiling.py): the receptive field read from the programs, the tiles'
plan, and the decodes: the integer path tiled is the untiled decode and the conformance
corpus bit for bit at every tested size (tile edges, odd sizes, 1×N and N×1, budgets that force
many tiles); the float path tiled stays within 60 dB PSNR of the untiled decode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wai_dispatch.codec import payload as codec_payload
from wai_dispatch.codec.sets import Manifest, SetStore
from wai_dispatch.codec.tables import EntropyTables
from wai_dispatch.conformance import neural_conformance_dir, sets_dir
from wai_dispatch.paths import tiling
from wai_dispatch.paths.job import SynthesisJob
from wai_dispatch.paths.onnx import TILE_BYTES_PER_PIXEL as FLOAT_BPP
from wai_dispatch.paths.onnx import OnnxRuntimeAdapter
from wai_dispatch.paths.tiling import Layer, Reach, plan, reach
from wai_dispatch.paths.waiops.adapter import TILE_BYTES_PER_PIXEL as INT_BPP
from wai_dispatch.paths.waiops.adapter import WaiOpsAdapter
from wai_dispatch.service.decoding.results import rgb_digest, to_rgb8

FLOAT_SET = sets_dir() / "bmshj2018-demo-q3"
INT_SET = sets_dir() / "int-synth-int8-units-demo-q3"
CORPUS = neural_conformance_dir()
DOC = json.loads((CORPUS / "corpus.json").read_bytes())
BMSHJ = Reach(stride=16, before=1, after=2)
UNTILED = 1 << 50


def _budget(bpp: int, rows: int, cols: int) -> int:
    """The tile budget whose windows hold ``rows × cols`` latent positions."""
    return bpp * 16 * 16 * rows * cols


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SetStore:
    store = SetStore(tmp_path_factory.mktemp("tiles") / "sets")
    store.install(FLOAT_SET)
    store.install(INT_SET)
    return store


def _files(store: SetStore, set_dir: Path) -> Any:
    return store.open(Manifest.from_bytes((set_dir / "set.json").read_bytes()).digest)


@pytest.fixture(scope="module")
def tables(store: SetStore) -> EntropyTables:
    files = _files(store, INT_SET)
    return EntropyTables.from_json(files.read(str(files.facts.tables)))


def _corpus_symbols(name: str, tables: EntropyTables) -> np.ndarray:
    return codec_payload.decode((CORPUS / name).read_bytes(), tables)


# the receptive field -----------------------------------------------------------------------


def test_the_bundled_programs_reach_one_latent_position_before_and_two_after(
    store: SetStore,
) -> None:
    """Four 5×5 stride-2 transposed convolutions with padding 2: picture rows 16a … 16a+15
    read latent rows a-1 … a+2 (worked by hand in paths/tiling.py's docstring)."""
    import onnx

    files = _files(store, FLOAT_SET)
    proto = onnx.load_from_string(files.read("decoder.onnx"))
    layers = tiling.onnx_layers(proto.graph)
    assert layers is not None
    assert reach(layers, "latent", "x_hat") == BMSHJ
    adapter = WaiOpsAdapter()
    symbols = np.zeros((1, 192, 2, 2), dtype=np.int32)
    program = adapter.program(
        SynthesisJob(_files(store, INT_SET), symbols.astype(np.float32), symbols)
    )
    got = reach(tiling.waiops_layers(program.operations), program.input_name, program.output_name)
    assert got == BMSHJ and got.field == 4


def test_reach_of_hand_made_programs() -> None:
    conv3 = Layer("y", ("x",), kernel=3, padding=1, padding_end=1)
    assert reach([conv3], "x", "y") == Reach(1, 1, 1)
    two = [conv3, Layer("z", ("y",), kernel=5, padding=2, padding_end=2)]
    assert reach(two, "x", "z") == Reach(1, 3, 3)
    # a residual: the union of both branches' reads
    res = [conv3, Layer("z", ("y", "x"))]
    assert reach(res, "x", "z") == Reach(1, 1, 1)
    up = Layer("y", ("x",), kernel=4, stride=2, padding=1, padding_end=1, transposed=True)
    assert reach([up], "x", "y") == Reach(2, 1, 1)
    # a strided convolution, a picture that is no multiple of the latent: not tiled
    assert (
        reach([Layer("y", ("x",), kernel=3, stride=2, padding=1, padding_end=1)], "x", "y") is None
    )
    assert reach([Layer("y", ("x",), kernel=3)], "x", "y") is None
    assert reach([conv3], "x", "nowhere") is None


def test_an_unknown_onnx_operation_is_not_tiled() -> None:
    from onnx import helper

    graph = helper.make_graph([helper.make_node("Resize", ["x"], ["y"])], "g", [], [])
    assert tiling.onnx_layers(graph) is None


# the plan ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("h", "w", "rows", "cols"),
    [(17, 23, 6, 6), (1, 37, 4, 9), (29, 1, 5, 4), (16, 16, 4, 4), (5, 5, 100, 100), (3, 64, 2, 2)],
)
def test_tile_interiors_partition_the_latent_and_windows_keep_the_budget(
    h: int, w: int, rows: int, cols: int
) -> None:
    budget = _budget(100, rows, cols)
    tiles = plan(h, w, BMSHJ, budget, 100)
    seen = np.zeros((h, w), dtype=int)
    for t in tiles:
        seen[t.iy0 : t.iy1, t.ix0 : t.ix1] += 1
        assert t.y0 == max(0, t.iy0 - 1) and t.y1 == min(h, t.iy1 + 2)
        assert t.x0 == max(0, t.ix0 - 1) and t.x1 == min(w, t.ix1 + 2)
        if len(tiles) > 1 and rows * cols >= 16:
            assert (t.y1 - t.y0) * (t.x1 - t.x0) <= rows * cols
    assert (seen == 1).all()
    assert (len(tiles) == 1) == (h * w <= rows * cols)


def test_a_row_of_latent_gets_long_tiles() -> None:
    tiles = plan(1, 4096, BMSHJ, _budget(100, 16, 16), 100)
    assert all(t.y1 - t.y0 == 1 for t in tiles)
    assert min(t.ix1 - t.ix0 for t in tiles[:-1]) == 256 - 3


# the integer path: bit for bit -------------------------------------------------------------


def _int_run(store: SetStore, symbols: np.ndarray, budget: int) -> np.ndarray:
    job = SynthesisJob(_files(store, INT_SET), symbols.astype(np.float32), symbols)
    return WaiOpsAdapter(tile_bytes=budget).run(job)


@pytest.mark.parametrize(
    ("h", "w", "rows", "cols"),
    [(17, 23, 8, 8), (17, 23, 11, 5), (1, 37, 4, 9), (29, 1, 6, 4), (9, 10, 4, 4)],
)
def test_the_integer_path_tiled_is_the_untiled_decode_bit_for_bit(
    store: SetStore, h: int, w: int, rows: int, cols: int
) -> None:
    rng = np.random.default_rng(h * 100 + w)
    symbols = rng.integers(-20, 21, size=(1, 192, h, w)).astype(np.int32)
    whole = _int_run(store, symbols, UNTILED)
    budget = _budget(INT_BPP, rows, cols)
    assert len(plan(h, w, BMSHJ, budget, INT_BPP)) > 1
    tiled = _int_run(store, symbols, budget)
    assert tiled.dtype == whole.dtype and tiled.shape == whole.shape == (1, 3, 16 * h, 16 * w)
    assert np.array_equal(tiled, whole)


def test_a_halo_short_of_the_receptive_field_changes_the_picture(
    store: SetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the previous test would catch: one latent position of halo too few."""
    import wai_dispatch.paths.waiops.adapter as adapter_module

    rng = np.random.default_rng(7)
    symbols = rng.integers(-20, 21, size=(1, 192, 9, 10)).astype(np.int32)
    whole = _int_run(store, symbols, UNTILED)
    short = Reach(16, 1, 1)
    monkeypatch.setattr(adapter_module, "reach", lambda *_a: short)
    tiled = _int_run(store, symbols, _budget(INT_BPP, 5, 5))
    assert not np.array_equal(tiled, whole)


@pytest.mark.parametrize("case", DOC["payloads"], ids=[p["name"] for p in DOC["payloads"]])
def test_the_integer_path_tiled_gives_the_corpus_hashes(
    store: SetStore, tables: EntropyTables, case: dict[str, Any]
) -> None:
    symbols = _corpus_symbols(case["payload"], tables)
    h, w = int(symbols.shape[2]), int(symbols.shape[3])
    rows, cols = (4, 40) if h == 1 else (12, 12)
    budget = _budget(INT_BPP, rows, cols)
    tiles = plan(h, w, BMSHJ, budget, INT_BPP)
    assert len(tiles) > 1 or h * w == 1, case["name"]
    rgb = to_rgb8(_int_run(store, symbols, budget))
    assert list(rgb.shape) == case["picture_shape"]
    assert rgb_digest(rgb) == case["rgb8_blake3"], case["name"]


def test_each_decoder_tiles_by_its_own_setting(
    store: SetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adapter without a budget of its own tiles by its job's, which the decoder sets from
    its ``tile_bytes`` (``WAI_TILE_BYTES``): opening decoder B does not change decoder A's."""
    from wai_dispatch.service.decoding.decoder import Decoder
    from wai_dispatch.service.settings import load

    seen: list[int] = []
    real = tiling.run_tiled
    monkeypatch.setattr(
        "wai_dispatch.paths.waiops.adapter.run_tiled",
        lambda x, r, tiles, *a: seen.append(len(tiles)) or real(x, r, tiles, *a),
    )
    small = _budget(INT_BPP, 6, 6)
    monkeypatch.setenv("WAI_TILE_BYTES", str(small))
    a = Decoder.assemble(**load(data_dir=store.root.parent).decoder_args(), adapters={})
    monkeypatch.setenv("WAI_TILE_BYTES", str(tiling.DEFAULT_TILE_BYTES))
    b = Decoder.assemble(**load(data_dir=store.root.parent).decoder_args(), adapters={})
    assert (a.tile_bytes, b.tile_bytes) == (small, tiling.DEFAULT_TILE_BYTES)
    symbols = np.ones((1, 192, 7, 7), dtype=np.int32)
    latent = symbols.astype(np.float32)
    files = _files(store, INT_SET)
    WaiOpsAdapter().run(a.job(files, latent, symbols))
    assert seen == [len(plan(7, 7, BMSHJ, small, INT_BPP))] and seen[0] > 1
    WaiOpsAdapter().run(b.job(files, latent, symbols))  # one tile: run whole
    assert len(seen) == 1
    assert SynthesisJob(files, latent, symbols).tile_bytes == tiling.DEFAULT_TILE_BYTES


# the float path: within 60 dB --------------------------------------------------------------


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


@pytest.mark.parametrize(
    ("name", "rows", "cols"),
    [
        ("hubble-768x512.waip", 12, 12),
        ("chelsea-448x288.waip", 7, 9),
        ("coffee-strip-4096x16.waip", 1, 40),
    ],
)
def test_the_float_path_tiled_is_within_60_db_of_the_untiled_decode(
    store: SetStore, tables: EntropyTables, name: str, rows: int, cols: int
) -> None:
    files = _files(store, FLOAT_SET)
    symbols = _corpus_symbols(name, tables)
    latent = codec_payload.latent(symbols, tables)
    job = SynthesisJob(files, np.asarray(latent, dtype=np.float32), symbols)
    whole = OnnxRuntimeAdapter(tile_bytes=UNTILED).run(job)
    budget = _budget(FLOAT_BPP, rows, cols)
    h, w = int(symbols.shape[2]), int(symbols.shape[3])
    assert len(plan(h, w, BMSHJ, budget, FLOAT_BPP)) > 1
    tiled = OnnxRuntimeAdapter(tile_bytes=budget).run(job)
    assert tiled.shape == whole.shape
    a, b = np.clip(tiled, 0, 1), np.clip(whole, 0, 1)
    assert _psnr(a, b) >= 60.0, _psnr(a, b)


def test_a_float_tile_is_computed_from_its_window_only(store: SetStore) -> None:
    """The tiled float decode of a latent whose far half is changed keeps the near half's
    picture rows that the change cannot reach (the receptive field, seen from outside)."""
    rng = np.random.default_rng(3)
    latent = rng.normal(0, 2, size=(1, 192, 12, 6)).astype(np.float32)
    other = latent.copy()
    other[:, :, 8:] += 5
    files = _files(store, FLOAT_SET)
    adapter = OnnxRuntimeAdapter(tile_bytes=_budget(FLOAT_BPP, 6, 6))
    one = adapter.run(SynthesisJob(files, latent))
    two = adapter.run(SynthesisJob(files, other))
    # latent row 8 reaches picture rows from 16·(8 − 2) = 96 on (two positions after)
    assert _psnr(one[:, :, :96], two[:, :, :96]) >= 60.0
    assert not np.allclose(one[:, :, 96:112], two[:, :, 96:112])


def test_a_large_tiled_integer_decode_shrinks_the_arena_after_its_last_tile(
    store: SetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the float path does (paths/onnx.py ``SHRINK_ARENA_ABOVE``): only the last tile of
    a decode over the threshold asks the engine to shrink its arena (measured: a 1024×1024
    integer decode in tiles of 128 MiB left 117 MB resident without it, 13 MB with it)."""
    import wai_dispatch.paths.waiops.adapter as adapter_module

    monkeypatch.setattr(adapter_module, "SHRINK_ARENA_ABOVE", 0)
    adapter = WaiOpsAdapter(tile_bytes=_budget(INT_BPP, 5, 5))
    symbols = np.ones((1, 192, 6, 5), dtype=np.int32)
    job = SynthesisJob(_files(store, INT_SET), symbols.astype(np.float32), symbols)
    runner = adapter._compiled(job).engines.runner()
    flags: list[bool] = []
    real = runner.run

    def spy(x: np.ndarray, limits: Any = None, *, shrink_arena: bool = False) -> np.ndarray:
        flags.append(shrink_arena)
        return real(x, limits, shrink_arena=shrink_arena)

    monkeypatch.setattr(runner, "run", spy)
    adapter.run(job)
    assert len(flags) > 1 and flags == [False] * (len(flags) - 1) + [True]
