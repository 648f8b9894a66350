"""The hyperprior trainer's rate (tools/train_bmshj2018_hyperprior.py): the rate of ``y`` is that of
``round(y)`` as the coder spends it, the gradient reaches ``h_a``/``h_s``, the latent crops are
seeded, and the shipped checkpoint's bound of 1e-9 (0 in float16) is why ``--from`` skips it."""

from __future__ import annotations

from typing import Any

import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: __import__("compressai"),
    "torch",
    "compressai",
    reason="the tools extra (torch, CompressAI)",
)
import torch  # noqa: E402

from wai_dispatch.conformance import weights_dir  # noqa: E402
from wai_dispatch.tools import train_bmshj2018_hyperprior as trainer  # noqa: E402
from wai_dispatch.tools._compressai import scale_hyperprior  # noqa: E402


@pytest.fixture
def small() -> Any:
    torch.manual_seed(0)
    net = scale_hyperprior(8, 12)
    net.train()
    return net


def test_the_rate_of_y_is_that_of_its_rounded_symbols(small: Any) -> None:
    y = torch.randn(2, 12, 8, 8) * 3
    bits_y, bits_z = trainer.latent_bits(small, y)
    _, scales = trainer.side_and_scales(small, y)
    gc = small.gaussian_conditional
    likelihood = gc.likelihood_lower_bound(gc._likelihood(torch.round(y), scales))
    assert torch.allclose(bits_y, -torch.log2(likelihood).sum())
    assert torch.isfinite(bits_y) and torch.isfinite(bits_z) and bits_z > 0
    (bits_y + bits_z).backward()
    for module in (small.h_a, small.h_s):
        grads = [p.grad for p in module.parameters()]
        assert all(g is not None for g in grads)
        assert any(float(g.abs().sum()) > 0 for g in grads if g is not None)


def test_latent_crops_are_seeded() -> None:
    latents = [(torch.randn(4, 10, 12), torch.randn(4, 10, 12)) for _ in range(3)]
    first = trainer.LatentSampler(latents, 4, seed=7).batch(5)
    assert first.shape == (5, 4, 4, 4)
    assert torch.equal(first, trainer.LatentSampler(latents, 4, seed=7).batch(5))
    assert not torch.equal(first, trainer.LatentSampler(latents, 4, seed=8).batch(5))


def test_the_shipped_checkpoint_stores_the_likelihood_bound_as_zero() -> None:
    """float16 has no 1e-9: the bound reads back 0, which would make a far-off symbol's rate
    infinite, which is why the trainer's ``--from`` loads the learned weights only."""
    path = weights_dir() / "bmshj2018-hyperprior-demo-q3.pt"
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert float(state["gaussian_conditional.likelihood_lower_bound.bound"]) == 0.0
    assert float(scale_hyperprior().gaussian_conditional.likelihood_lower_bound.bound) > 0
