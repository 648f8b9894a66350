"""The integer set writer (tools/wai_int_synth_set.py): with the default profile it reproduces the
retired int-synth-demo-q3 set byte for byte (conformance/retired/; the bundled set is the
``int8-units`` profile's: tests/tools/test_int_synth_units.py), its program holds the bound rule
below 2^24, it keeps the float set's tables and payload, it refuses a checkpoint whose synthesis is
not the set's, and its arithmetic gives the same bits under other thread counts and SIMD paths (the
CPU-independence docs/int-synth-set.md argues)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: __import__("compressai"),
    "torch",
    "compressai",
    reason="the tools extra (torch, CompressAI)",
)

from wai_dispatch.codec.sets import Manifest  # noqa: E402
from wai_dispatch.conformance import retired_dir, sets_dir  # noqa: E402
from wai_dispatch.tools import wai_int_synth_set as writer  # noqa: E402
from wai_dispatch.tools.bmshj2018_model import SetWriterError  # noqa: E402

RETIRED = retired_dir() / "int-synth-demo-q3"
FLOAT = sets_dir() / "bmshj2018-demo-q3"


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_writer_reproduces_the_retired_integer_set(tmp_path: Path) -> None:
    out = writer.write_set(tmp_path / "set", from_set=FLOAT)
    written, bundled = _files(out), _files(RETIRED)
    assert sorted(written) == sorted(bundled)
    assert [n for n in bundled if written[n] != bundled[n]] == []
    manifest = Manifest.from_bytes(bundled["set.json"])
    assert manifest.capability == "wai.neural.int_synth"
    assert (
        manifest.facts.to_json()["derived_from"]
        == Manifest.from_bytes((FLOAT / "set.json").read_bytes()).digest
    )
    assert bundled["cdfs_q3.json"] == (FLOAT / "cdfs_q3.json").read_bytes()
    assert bundled["payload.bin"] == (FLOAT / "payload.bin").read_bytes()
    layers = manifest.facts.to_json()["quantisation"]["layers"]
    assert max(v["accumulator_max"] for k, v in layers.items() if k.startswith("deconv")) < 2**24


def test_a_checkpoint_that_is_not_the_float_sets_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "float"
    other.mkdir()
    for name, data in _files(FLOAT).items():
        (other / name).write_bytes(data)
    blob = bytearray((other / "decoder.weights").read_bytes())
    blob[100] ^= 1
    (other / "decoder.weights").write_bytes(bytes(blob))
    with pytest.raises(SetWriterError, match="not the float set's"):
        writer.write_set(tmp_path / "set", from_set=other)
    assert not (tmp_path / "set").exists()


#: The writer's arithmetic on one calibration crop (the exact analysis and synthesis, the
#: statistics, the quantiser), and the float set writer's tables and payload symbols: a digest of
#: everything they produce.
_ARITHMETIC = """
import hashlib, sys
import numpy as np
import torch
if sys.argv[1] == "flush":
    torch.set_flush_denormal(True)
from wai_dispatch.conformance import sets_dir
from wai_dispatch.tools import int_synth_ptq, wai_int_synth_set as writer
from wai_dispatch.tools.train_bmshj2018 import TRAIN_IMAGES
from wai_dispatch.tools.bmshj2018_model import load_model
src = sets_dir() / "bmshj2018-demo-q3"
weights = writer.float_weights(src)
model, _ = load_model(checkpoint=None, pretrained=False, quality=3)
stats, seen = writer.calibrate(model, weights, print, pictures=TRAIN_IMAGES[:1], crops=1)
tables = (src / "cdfs_q3.json").read_bytes()
medians = np.array(writer.json.loads(tables)["medians"], dtype=np.float32)
b, _ = int_synth_ptq.quantise(weights, stats, medians, writer.symbol_range(tables))
h = hashlib.sha256(repr(seen).encode())
for key in sorted(stats):
    h.update(stats[key].astype("<f8").tobytes())
h.update(b.program_json("x4", 3) + b.weights())
# The float set writer's (tools/wai_bmshj2018_npu_set.py, its symbols tools/bmshj2018_symbols.py):
# its tables and its payload's symbols.
from wai_dispatch.tools.bmshj2018_symbols import exact_symbols, payload_picture
from wai_dispatch.tools.set_writer_options import DEFAULT_SEED
eb = model.entropy_bottleneck
for t in (eb._quantized_cdf, eb._offset, eb._cdf_length):
    h.update(t.numpy().astype("<i4").tobytes())
h.update(exact_symbols(model, payload_picture(DEFAULT_SEED)[0])[0].astype("<i4").tobytes())
print("digest", h.hexdigest(), torch.get_num_threads(), torch.backends.cpu.get_cpu_capability())
"""


def _simd_features() -> list[str]:
    """The NumPy dispatch targets this CPU runs (to switch off with NPY_DISABLE_CPU_FEATURES)."""
    import numpy as np

    umath = getattr(np, "_core", None) or np.core
    module = umath._multiarray_umath
    have = module.__cpu_features__
    return [f for f in module.__cpu_dispatch__ if have.get(f)]


def _arithmetic_digest(env: dict[str, str], mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _ARITHMETIC, mode],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("digest ")][-1]
    return line.split()[1]


@pytest.mark.slow
def test_the_writers_arithmetic_does_not_depend_on_threads_or_simd() -> None:
    """One thread against two with every SIMD path we can switch off (NumPy's dispatch targets,
    torch's ATen kernels, MKL's and oneDNN's instruction sets) and denormals flushed: the
    calibration statistics, the quantised program, and the float set's tables and payload
    symbols are the same bits. (The writers before exact arithmetic failed it: torch's float32
    convolutions under ATEN_CPU_CAPABILITY=default and oneDNN limited to SSE4.1 moved the
    statistics, and its vectorised logistic the tables.)"""
    one = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    plain = {
        **{"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
        "NPY_DISABLE_CPU_FEATURES": " ".join(_simd_features()),
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
    }
    assert _arithmetic_digest(one, "plain") == _arithmetic_digest(plain, "flush")
