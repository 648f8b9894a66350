"""ONNX Runtime's CPU arena gives a large decode's memory back (paths/onnx.py
``SHRINK_ARENA_ABOVE``), and a tiled decode's arena holds one tile at most even without the
shrink (paths/tiling.py): measured in fresh processes, so no other test's arena counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if not Path("/proc/self/statm").exists():  # pragma: no cover - Linux CI has it
    pytest.skip("resident memory is read from /proc/self/statm (Linux)", allow_module_level=True)

_TESTS = Path(__file__).resolve().parents[1]

# One warm small decode, then one 1024×1024 decode; prints the resident growth in bytes.
_SCRIPT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from _svc import envelope_of_latent
from wai_dispatch.codec.envelope import parse_json
from wai_dispatch.paths import onnx as onnx_path
from wai_dispatch.service.decoding.decoder import Decoder

if sys.argv[3] == "off":
    onnx_path.SHRINK_ARENA_ABOVE = 1 << 62

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

root = Path(sys.argv[2])
small = envelope_of_latent(root / "sets", 4, 4)
big = envelope_of_latent(root / "sets", 64, 64)
decoder = Decoder.assemble(root)
decoder.tile_bytes = int(sys.argv[4])
decoder.decode(decoder.prepare(parse_json(small)))
before = rss()
decoder.decode(decoder.prepare(parse_json(big)))
print(json.dumps({"growth": rss() - before}))
"""


UNTILED = 1 << 50
TILE = 128 << 20


def _growth(tmp_path: Path, mode: str, tile_bytes: int) -> int:
    root = tmp_path / f"{mode}-{tile_bytes}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(_TESTS), str(root), mode, str(tile_bytes)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    return int(json.loads(out.stdout.strip().splitlines()[-1])["growth"])


@pytest.mark.slow
def test_a_large_decode_gives_its_arena_back(tmp_path: Path) -> None:
    """Measured here: 1024×1024 untiled leaves ~530 MB resident without the shrink; in tiles
    of 128 MiB, about a tile's activations without it, ~10–35 MB with it."""
    kept = _growth(tmp_path, "off", UNTILED)
    tiled = _growth(tmp_path, "off", TILE)
    shrunk = _growth(tmp_path, "on", TILE)
    assert kept > 300 << 20, kept
    assert tiled < TILE + (32 << 20), tiled
    assert shrunk < 100 << 20, shrunk
    assert shrunk * 4 < kept
