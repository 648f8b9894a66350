"""Import CompressAI beside the CPU-only torch wheel.

CompressAI 1.2.8 imports ``torchvision.transforms`` when it starts
(``compressai/registry/transforms.py`` builds its ``TRANSFORMS`` registry from
the upper-case names of that module).  The torchvision wheel that PyPI serves
is built against a CUDA torch and does not import beside the CPU torch wheel
our tools use, and none of our tools needs a torchvision transform.  So, when
``torchvision`` cannot be imported, :func:`import_compressai` places a minimal
empty stub ``torchvision`` / ``torchvision.transforms`` in ``sys.modules``
before importing CompressAI.  The stub exports no names, so CompressAI's
registry simply holds no torchvision transforms; the models, entropy models
and entropy coders are unaffected.  A working torchvision, where installed, is
always preferred.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["checkpoint_state_dict", "factorized_prior", "import_compressai", "scale_hyperprior"]


def _install_torchvision_stub() -> None:
    """Put an empty ``torchvision`` package with a ``transforms`` module in ``sys.modules``."""
    package = types.ModuleType("torchvision")
    package.__doc__ = "Stub inserted by tools._compressai: torchvision is unavailable."
    package.__path__ = []  # mark it as a package so ``import torchvision.transforms`` resolves
    transforms = types.ModuleType("torchvision.transforms")
    transforms.__doc__ = "Empty stub: CompressAI's transform registry gets no torchvision names."
    package.transforms = transforms  # type: ignore[attr-defined]
    sys.modules["torchvision"] = package
    sys.modules["torchvision.transforms"] = transforms


def import_compressai() -> types.ModuleType:
    """Return the ``compressai`` module, stubbing ``torchvision`` first if it will not import."""
    if "compressai" in sys.modules:
        return sys.modules["compressai"]
    try:
        importlib.import_module("torchvision.transforms")
    except (ImportError, OSError, RuntimeError):  # absent, or a CUDA build beside the CPU torch
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        _install_torchvision_stub()
    return importlib.import_module("compressai")


def factorized_prior(N: int = 128, M: int = 192) -> Any:
    """Return an untrained ``compressai.models.FactorizedPrior(N, M)`` (bmshj2018-factorized).

    N=128, M=192 is CompressAI's ``bmshj2018_factorized`` architecture for qualities 1-5.
    """
    import_compressai()
    from compressai.models import FactorizedPrior

    return FactorizedPrior(N, M)


def scale_hyperprior(N: int = 128, M: int = 192) -> Any:
    """Return an untrained ``compressai.models.ScaleHyperprior(N, M)`` (bmshj2018-hyperprior).

    N=128, M=192 is CompressAI's ``bmshj2018_hyperprior`` architecture for qualities 1-5.
    """
    import_compressai()
    from compressai.models import ScaleHyperprior

    return ScaleHyperprior(N, M)


#: Where CompressAI's own tools find the state dict in a saved checkpoint, in the order its
#: ``update_model`` utility looks (``examples/train.py`` saves ``{"state_dict": …, …}``; other
#: trainers save ``{"network": …}``; a bare state dict is the dict itself).
CHECKPOINT_KEYS = ("network", "state_dict", "model_state_dict")


def checkpoint_state_dict(checkpoint: Any) -> dict[str, Any]:
    """The model's state dict in what ``torch.load`` returned, read as CompressAI reads it:
    the first of :data:`CHECKPOINT_KEYS` it holds (else the checkpoint itself), its keys
    renamed by ``compressai.zoo.load_state_dict`` (the ``module.`` prefix a model trained with
    ``DataParallel`` on several GPUs saves is dropped; older entropy-bottleneck names mapped),
    floating tensors as float32. ``ValueError`` when it is no state dict."""
    import torch

    import_compressai()
    from compressai.zoo import load_state_dict

    state = checkpoint
    if isinstance(state, dict):
        for key in CHECKPOINT_KEYS:
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError(
            f"not a state dict (nor a checkpoint holding one under {', '.join(CHECKPOINT_KEYS)})"
        )
    state = load_state_dict(state)
    return {
        k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v
        for k, v in state.items()
    }
