"""``import wai_dispatch.dispatch`` stays pure: no runtime, no numpy (STYLE: heavy runtimes
import lazily)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("onnxruntime", "coremltools", "wgpu", "torch", "numpy")

SCRIPT = f"""
import sys
{{stmt}}
heavy = {HEAVY!r}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
print(",".join(loaded))
"""


@pytest.mark.parametrize(
    "stmt",
    [
        "import wai_dispatch.dispatch",
        "from wai_dispatch.dispatch import demand, admit, choose",
        "import wai_dispatch.dispatch.rules, wai_dispatch.dispatch.report, "
        "wai_dispatch.dispatch.adapter, wai_dispatch.dispatch.offer",
    ],
)
def test_import_dispatch_loads_no_heavy_module(stmt: str) -> None:
    """In a fresh interpreter, importing the pure core loads none of the heavy runtimes."""
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(stmt=stmt)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "", f"{stmt!r} loaded {result.stdout.strip()}"


def test_dispatch_imports_only_the_standard_library() -> None:
    """The core's modules import nothing outside the standard library and dispatch itself."""
    code = (
        "import sys; before = set(sys.modules); import wai_dispatch.dispatch; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "std = set(sys.stdlib_module_names); "
        "print(','.join(sorted(m for m in new if m not in std and m != 'wai_dispatch')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""
