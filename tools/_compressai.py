"""CompressAI's models and checkpoints as the tools read them: the two bmshj2018 architectures,
untrained, and the state dict in a saved checkpoint.

``import compressai`` needs ``torchvision.transforms`` at start-up; `make tools` installs the
project's shim of it (``shims/torchvision/``: NOT torchvision, README's "The tools extra").
"""

from __future__ import annotations

from typing import Any


def factorized_prior(N: int = 128, M: int = 192) -> Any:
    """Return an untrained ``compressai.models.FactorizedPrior(N, M)`` (bmshj2018-factorized).

    N=128, M=192 is CompressAI's ``bmshj2018_factorized`` architecture for qualities 1-5.
    """
    from compressai.models import FactorizedPrior

    return FactorizedPrior(N, M)


def scale_hyperprior(N: int = 128, M: int = 192) -> Any:
    """Return an untrained ``compressai.models.ScaleHyperprior(N, M)`` (bmshj2018-hyperprior).

    N=128, M=192 is CompressAI's ``bmshj2018_hyperprior`` architecture for qualities 1-5.
    """
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
