"""Shared by the int8 engines' suites (tests/paths/test_waiops_int8*.py): ``int8_check`` in a
fresh process, on this CPU or under qemu-user's emulation of an older one."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: qemu-user CPU models: AVX without AVX2 (MLAS's SSE4.1 kernels, which widen to 16 bits), and
#: AVX2 without AVX-512 or VNNI (its vpmaddubsw kernel, the one that saturates a 16-bit pair
#: sum). Nehalem (SSE4.2, no AVX) would reach the same SSE4.1 kernels, but this venv's NumPy 2.4
#: does not start on qemu's model of it (illegal instruction at import), so SandyBridge stands
#: for them.
EMULATED = ("SandyBridge", "Haswell")


def run_check(*args: str, cpu: str | None = None, timeout: int = 900) -> dict[str, object]:
    """``python -m wai_dispatch.tools.int8_check ARGS`` (under ``qemu-x86_64 -cpu CPU``): its
    last JSON line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "wai_dispatch.tools.int8_check", *args]
    if cpu is not None:
        cmd = ["qemu-x86_64", "-cpu", cpu, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert lines, out.stderr[-2000:]
    result: dict[str, object] = json.loads(lines[-1])
    return result


def need_qemu() -> None:
    """Skip (saying why) where no emulated x86-64 CPU can run."""
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-user is not installed (apt-get install qemu-user): no emulated CPUs")
    if platform.machine() != "x86_64":
        pytest.skip("the emulated CPU models are x86-64 ones; this machine is not x86-64")
