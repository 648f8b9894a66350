"""The tools install imports what it installs (issue 39): in the environment `make tools` makes,
``import compressai`` works in a fresh interpreter with nothing of the checkout on its path, and
a CompressAI model runs, through the ``torchvision`` that `make tools` installs beside it —
``shims/torchvision/``, NOT torchvision, whose every part but an empty ``torchvision.transforms``
is refused with an ``ImportError`` naming the shim."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.tools,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("compressai") is None,
        reason="the tools extra (torch, CompressAI) is not installed",
    ),
]

#: A researcher's script: CompressAI's own model, randomly initialised (no download), forward.
SCRIPT = """
import sys
import torch
import compressai
import torchvision
from compressai.zoo import bmshj2018_factorized

torch.manual_seed(0)
net = bmshj2018_factorized(quality=1, pretrained=False).eval()
with torch.no_grad():
    out = net(torch.rand(1, 3, 64, 64))
assert out["x_hat"].shape == (1, 3, 64, 64), out["x_hat"].shape
assert list(out["likelihoods"]) == ["y"], list(out["likelihoods"])
ours = sorted(m for m in sys.modules if m.startswith("wai_dispatch"))
print(compressai.__version__, torchvision.__version__, ours)
"""


@pytest.mark.slow  # a fresh interpreter imports torch and CompressAI: about 5 s here
def test_compressai_imports_and_runs_in_a_fresh_interpreter(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=tmp_path,  # not the checkout: its folders are no import path
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "1.2.8", done.stdout
    assert done.stdout.rstrip().endswith("[]"), done.stdout  # nothing of the project loaded


#: The shim provides torchvision here (a real torchvision, installed over it, replaces it).
HAS_SHIM = "0+wai.shim" in {d.version for d in metadata.distributions(name="torchvision")}


@pytest.mark.skipif(not HAS_SHIM, reason="torchvision here is not the shim")
def test_the_shim_is_empty_and_refuses_the_rest_by_name() -> None:
    import torchvision
    import torchvision.transforms as transforms

    assert torchvision.__version__ == "0+wai.shim"
    assert not [k for k in vars(transforms) if k[0].isupper()]  # CompressAI's registry: none
    for attempt in (
        lambda: transforms.ToTensor,
        lambda: torchvision.models,
        lambda: importlib.import_module("torchvision.ops"),
        lambda: exec("from torchvision.transforms import Compose"),
    ):
        with pytest.raises(ImportError, match=r"this torchvision is wai-dispatch's shim \("):
            attempt()
    assert not hasattr(torchvision, "__wrapped__")  # dunders absent as usual (inspect, pickle)
    with pytest.raises(ImportError) as caught:
        importlib.import_module("torchvision.datasets")
    assert caught.value.name == "torchvision.datasets"
