"""The hyperprior set writer (tools/wai_bmshj2018_hyperprior_set.py): with the default profile it
reproduces the retired ``bmshj2018-hyperprior-demo-q3`` set byte for byte (conformance/retired/;
the bundled set and its corpus are the ``int8-units`` profile's:
tests/tools/test_hyperprior_units.py), the written things being pure functions of their inputs;
the encoder refuses bad input with a typed error and codes the bundled set's own payload."""

from __future__ import annotations

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

import numpy as np  # noqa: E402

from wai_dispatch.conformance import retired_dir, sets_dir  # noqa: E402
from wai_dispatch.dispatch.errors import WaiError  # noqa: E402
from wai_dispatch.tools import wai_bmshj2018_hyperprior_set as writer  # noqa: E402
from wai_dispatch.tools.hyperprior_encode import encode_hyperprior  # noqa: E402

BUNDLED = sets_dir() / "bmshj2018-hyperprior-int8-units-demo-q3"
RETIRED = retired_dir() / "bmshj2018-hyperprior-demo-q3"


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_writer_reproduces_the_retired_set(tmp_path: Path) -> None:
    out = writer.write_set(tmp_path / "set")
    got, want = _files(out), _files(RETIRED)
    assert sorted(got) == sorted(want)
    differ = [name for name in want if got[name] != want[name]]
    assert differ == [], f"files differ from the retired set: {differ}"


@pytest.mark.parametrize(
    ("folder", "picture", "code"),
    [
        (BUNDLED.name, np.zeros((64, 100, 3), np.uint8), "invalid_argument"),
        (BUNDLED.name, np.zeros((64, 64), np.uint8), "invalid_argument"),
        (BUNDLED.name, np.zeros((64, 64, 3), np.float32), "invalid_argument"),
        ("bmshj2018-demo-q3", np.zeros((64, 64, 3), np.uint8), "set_capability_mismatch"),
    ],
)
def test_the_encoder_refuses_bad_input_with_a_typed_error(
    folder: str, picture: np.ndarray, code: str
) -> None:
    with pytest.raises(WaiError) as err:
        encode_hyperprior(sets_dir() / folder, picture)
    assert err.value.code == code


def test_the_encoder_codes_the_sets_own_payload() -> None:
    """``encode_hyperprior`` on the set's payload picture gives the set's payload, byte for
    byte (the set writer coded it with the same function)."""
    import json

    from wai_dispatch.tools.bmshj2018_symbols import payload_picture

    info = json.loads((BUNDLED / "payload.json").read_bytes())
    picture, _ = payload_picture(info["seed"])
    assert encode_hyperprior(BUNDLED, picture) == (BUNDLED / "payload.bin").read_bytes()
