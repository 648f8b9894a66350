"""The WGSL integer kernels (docs/wgsl-path.md) run the hyperprior set's hyper-synthesis to the
same scale indexes as the CPU's exact engine, hence the same symbols digest (§3,
entropy-consistency; docs/bmshj2018-hyperprior-set.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.conformance import sets_dir
from wai_dispatch.service.decoding.hyperprior import HyperStage, scale_indexes
from wai_dispatch.tools.hyperprior_encode import open_folder

pytest.importorskip("wgpu", reason="wgpu (wgpu-py) is not installed: pip install wgpu")

SET = sets_dir() / "bmshj2018-hyperprior-int8-units-demo-q3"
PINNED = json.loads((SET / "payload.json").read_bytes())["symbols_digest"]


@pytest.mark.gpu
def test_wgsl_kernels_run_the_hyper_synthesis_to_the_same_digest(wgpu_device: Any) -> None:
    from wai_dispatch.paths.wgsl.execute import run_program

    stage = HyperStage.of(open_folder(SET))
    assert stage is not None
    payload = (SET / "payload.bin").read_bytes()
    header = waih.read_header(payload)
    z = waih.decode_z(payload, header, stage.z_tables)
    index = scale_indexes(run_program(wgpu_device, stage.program, z), stage.thresholds)
    y = waih.decode_y(payload, header, index, stage.y_tables)
    assert waih.symbols_digest(z, y) == PINNED
