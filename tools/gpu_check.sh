#!/usr/bin/env bash
# A borrowed GPU machine's checks in one short run (a few minutes, no network):
# 1. §8's evidence on every path present here (`wai-dispatch evidence`): for each bundled set,
#    the unit and placement, the symbols against the CPU reference's, PSNR and samples
#    differing, replicate refused on every float path, the integer paths' corpus hashes —
#    printed as a table and written to evidence-gpu.json (WAI_EVIDENCE_OUT to change it);
# 2. the GPU tests under WAI_REQUIRE_GPU=1 (tests/paths/test_onnx_gpu.py,
#    tests/decoding/test_evidence_hardware.py): they fail unless gpu/onnx-runtime/float runs
#    on a hardware GPU (CUDA, or the onnxruntime-ep-webgpu plugin: the webgpu extra);
# 3. where wgpu imports, the WGSL kernels' corpus and timings (tools/gpu_check.py), which
#    needs a GPU adapter (--json for its summary, --repeat N for more timed runs).
# Needs the repository's environment (`make test`'s .venv, or pip install -e '.[test,webgpu]').
# Exit 0 only when every step passes.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if ! "$PY" -c "import wai_dispatch" 2>/dev/null; then
  echo "gpu_check: $PY cannot import wai_dispatch: pip install -e '.[test,webgpu]' first" >&2
  exit 1
fi
status=0
"$PY" -m wai_dispatch paths || status=1
"$PY" -m wai_dispatch evidence --out "${WAI_EVIDENCE_OUT:-evidence-gpu.json}" || status=1
WAI_REQUIRE_GPU=1 "$PY" -m pytest -q -p no:cacheprovider \
  tests/paths/test_onnx_gpu.py tests/decoding/test_evidence_hardware.py || status=1
if "$PY" -c "import wgpu" 2>/dev/null; then
  "$PY" -m wai_dispatch.tools.gpu_check --require-gpu "$@" || status=1
else
  echo "gpu_check: wgpu does not import: the WGSL kernels' check is not run (the gpu extra)" >&2
  status=1
fi
exit $status
