"""A set's programs, checked when the set loads, so a broken one is refused with its own typed
error instead of a later ``dispatch_backend_failed``. Only exact, cheap checks run here: today
``wai-ops/1`` (format, weights, the bound rule); ONNX and Core ML programs are read by their
runtimes.
"""

from __future__ import annotations

from wai_dispatch.paths.job import SetFiles
from wai_dispatch.paths.waiops.adapter import load_set_program, program_spec


def check_programs(files: SetFiles) -> None:
    """Raise the typed error of the first program of ``files`` that does not load."""

    if program_spec(files) is not None:
        load_set_program(files)
