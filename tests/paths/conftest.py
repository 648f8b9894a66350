"""The paths' shared fixture: a WebGPU adapter through wgpu (``gpu/wgsl/integer``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def wgpu_device() -> Iterator[Any]:
    """The WGSL path's runner on this machine's WebGPU adapter (Mesa's lavapipe, a software
    Vulkan, in CI: it counts as a GPU here); the tests skip where there is none. Tests using it
    carry the ``gpu`` marker (tests/conftest.py)."""
    pytest.importorskip("wgpu", reason="wgpu (wgpu-py) is not installed: pip install wgpu")
    from wai_dispatch.paths.wgsl.runner import Runner, UnitAbsent

    try:
        runner = Runner.acquire()
    except UnitAbsent as exc:
        pytest.skip(f"no WebGPU adapter on this machine (no Vulkan driver?): {exc}")
    yield runner
