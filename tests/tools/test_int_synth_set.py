"""The integer set writer (tools/wai_int_synth_set.py): it reproduces the bundled
int-synth-demo-q3 set byte for byte, its program holds the bound rule below 2^24, it keeps the
float set's tables and payload, and it refuses a checkpoint whose synthesis is not the set's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.tools

try:
    import torch  # noqa: F401

    from wai_dispatch.tools._compressai import import_compressai

    import_compressai()
except Exception as exc:  # ImportError, or a broken torch build
    pytest.skip(f"torch and CompressAI are not importable: {exc}", allow_module_level=True)

from wai_dispatch.codec.sets import Manifest  # noqa: E402
from wai_dispatch.conformance import sets_dir  # noqa: E402
from wai_dispatch.tools import wai_int_synth_set as writer  # noqa: E402

BUNDLED = sets_dir() / "int-synth-demo-q3"
FLOAT = sets_dir() / "bmshj2018-demo-q3"


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_writer_reproduces_the_bundled_integer_set(tmp_path: Path) -> None:
    out = writer.write_set(tmp_path / "set", from_set=FLOAT)
    written, bundled = _files(out), _files(BUNDLED)
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
    with pytest.raises(writer.IntSetError, match="not the float set's"):
        writer.write_set(tmp_path / "set", from_set=other)
    assert not (tmp_path / "set").exists()
