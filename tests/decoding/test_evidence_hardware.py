"""§8's evidence where the hardware is: the neural-processor set read from ``WAI_NPU_SET``
(``WAI_REQUIRE_NPU_SET=1``: fail without it), and a GPU path (``WAI_REQUIRE_GPU=1``: fail unless
a GPU path runs), each through ``Decoder.evidence`` (``wai-dispatch evidence``), as §8 describes.

Without the variables, the NPU test skips (the set is not committed: its weights are
CompressAI's) and the GPU test holds what this machine has: the GPU paths absent, or refused,
with their reasons. tools/gpu_check.sh runs these with ``WAI_REQUIRE_GPU=1`` on a GPU machine."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from wai_dispatch.conformance import sets_dir

NPU_SET = os.environ.get("WAI_NPU_SET", "")
REQUIRE_NPU_SET = os.environ.get("WAI_REQUIRE_NPU_SET") == "1"
REQUIRE_GPU = os.environ.get("WAI_REQUIRE_GPU") == "1"
FLOAT_SET = sets_dir() / "bmshj2018-demo-q3"
INT_SET = sets_dir() / "int-synth-int8-units-demo-q3"


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (item,) = doc["sets"]
    return {row["path"]: row for row in item["paths"]}


def held(row: dict[str, Any], unit: str) -> None:
    """§8's row for a float path that ran: on ``unit``, placed there, the CPU reference's
    symbols, within §6.4's bound, ``replicate`` refused."""
    assert row["ran"] is True, row
    assert row["unit"] == unit
    placement = row["placement"]
    assert placement is None or placement[unit] > 0, placement
    assert row["symbols_equal"] is True
    assert row["bound_holds"] is True, f"{row['psnr_db']} dB against the CPU reference"
    assert row["replicate"] == "dispatch_tier_refused"


def test_npu_set_evidence(decoder: Any) -> None:
    if not os.environ.get("WAI_NPU_SET"):
        if REQUIRE_NPU_SET:
            pytest.fail(
                "WAI_REQUIRE_NPU_SET=1 but WAI_NPU_SET is not set: name the neural-processor "
                "set's folder (make-set bmshj2018 --out DIR writes one; §8)"
            )
        pytest.skip("WAI_NPU_SET is not set: the neural-processor set is not committed (§8)")
    doc = decoder.evidence(Path(NPU_SET)).to_json()
    (item,) = doc["sets"]
    assert item["capability"] == "wai.neural.bmshj2018"
    assert item["symbols_equal"] is True
    by_path = rows(doc)
    assert by_path["cpu/onnx-runtime/float"]["ok"] is True
    npu = by_path["npu/model-runtime/float"]
    if sys.platform == "darwin" or REQUIRE_NPU_SET:
        held(npu, "npu")  # the plan puts the program's operations on the neural processor
    else:
        assert npu["present"] is False and npu["reason"]


@pytest.mark.slow  # the integer set's corpus decoded on every integer path present
def test_gpu_evidence(decoder: Any) -> None:
    float_rows = rows(decoder.evidence(FLOAT_SET).to_json())
    gpu = float_rows["gpu/onnx-runtime/float"]
    if REQUIRE_GPU:
        assert gpu["present"], f"WAI_REQUIRE_GPU=1 and gpu/onnx-runtime/float: {gpu['reason']}"
        held(gpu, "gpu")
    elif not gpu["present"]:
        assert "CUDAExecutionProvider" in gpu["reason"]
        assert "WebGpuExecutionProvider" in gpu["reason"]
    else:
        assert gpu["ok"] is not False, gpu
    wgsl = rows(decoder.evidence(INT_SET).to_json())["gpu/wgsl/integer"]
    if wgsl.get("ran"):  # a hardware GPU: the integer kernels give the corpus's hashes
        assert wgsl["tier"] == "decode-equivalence"
        assert wgsl["corpus"] and all(c["ok"] for c in wgsl["corpus"]), wgsl["corpus"]
    elif wgsl["present"]:  # a software adapter (lavapipe) is reported, not claimed as a GPU
        assert wgsl["code"] in ("dispatch_not_placed", "dispatch_unit_absent"), wgsl
        assert not REQUIRE_GPU or gpu["present"]
