"""A set's programs, checked when the set loads: a program this build can read is validated
before any decode touches it, so a broken one is refused with its own typed error (for a
``wai-ops/1`` program: the operation and the bound it breaks) instead of surfacing later as a
path's ``dispatch_backend_failed``.

Only programs whose checking is exact and cheap are checked here; today that is ``wai-ops/1``
(format, weights, the bound rule). ONNX and Core ML programs are read by their runtimes.
"""

from __future__ import annotations

from wai_dispatch.paths.job import SetFiles
from wai_dispatch.paths.waiops.adapter import load_set_program, program_spec


def check_programs(files: SetFiles) -> None:
    """Raise the typed error of the first program of ``files`` that does not load."""

    if program_spec(files) is not None:
        load_set_program(files)
