"""Path adapters, one per backend (§1, §4): each answers §4's questions for its path and
states its placement (§5) — :mod:`.onnx` (ONNX Runtime, CPU and GPU), :mod:`.coreml` (the NPU),
:mod:`.waiops` (the integer interpreter and engines), :mod:`.wgsl` (WebGPU kernels). The
:mod:`.registry` builds the adapters of an offer; :mod:`.lru` is the program cache every adapter
is given; :mod:`.job` is what an adapter is asked to run.

Face: the machine's adapters (``known_adapters``, ``adapters_for`` a program cache budget,
``probe`` for each path's ``PathStatus``), the job they run (``SynthesisJob``) and the program
cache (``Programs``, its ``LRU``). Heavy runtimes (onnxruntime, onnx, coremltools, wgpu) are
imported inside the functions that need them. Imports ``dispatch`` and ``codec`` only."""

from __future__ import annotations

from wai_dispatch._face import lazy_face as _lazy_face

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (the sink client's start)
if TYPE_CHECKING:
    from wai_dispatch.paths.job import SynthesisJob
    from wai_dispatch.paths.lru import LRU, Programs
    from wai_dispatch.paths.registry import PathStatus, adapters_for, known_adapters, probe

__all__ = [
    "LRU",
    "PathStatus",
    "Programs",
    "SynthesisJob",
    "adapters_for",
    "known_adapters",
    "probe",
]

#: The face: each name and its module (``module:attr`` where named otherwise), imported on
#: first use (wai_dispatch/_face.py).
_FACE = {
    "LRU": "lru",
    "PathStatus": "registry",
    "Programs": "lru",
    "SynthesisJob": "job",
    "adapters_for": "registry",
    "known_adapters": "registry",
    "probe": "registry",
}

__getattr__, __dir__ = _lazy_face(__name__, _FACE, __all__)
