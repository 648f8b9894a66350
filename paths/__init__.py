"""Path adapters, one per backend (§1, §4): each answers §4's questions for its path and
states its placement (§5) — :mod:`.onnx` (ONNX Runtime, CPU and GPU), :mod:`.coreml` (the NPU),
:mod:`.waiops` (the integer interpreter and engines), :mod:`.wgsl` (WebGPU kernels). The
:mod:`.registry` builds the adapters of an offer; :mod:`.lru` is the program cache every adapter
is given; :mod:`.job` is what an adapter is asked to run."""
