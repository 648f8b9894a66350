#!/usr/bin/env bash
# The WGSL path on a machine with a real GPU, in one command (a few minutes, no network):
# decodes the integer capability's conformance corpus through the gpu/wgsl/integer kernels,
# checks every RGB8 hash, times each decode against the interpreter and prints one summary.
# Needs the repository's environment with wgpu (`pip install -e '.[gpu]'`, or `make test`'s
# .venv) and a Vulkan, Metal or D3D12 driver. Exit 0 only when every hash matches and the
# adapter is a GPU; pass --json for the summary as JSON, --repeat N for more timed runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
if ! "$PY" -c "import wgpu, wai_dispatch" 2>/dev/null; then
  echo "gpu_check: $PY cannot import wgpu and wai_dispatch: pip install -e '.[gpu]' first" >&2
  exit 1
fi
exec "$PY" -m wai_dispatch.tools.gpu_check --require-gpu "$@"
