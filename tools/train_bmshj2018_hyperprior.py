"""Train the project's own demo weights for bmshj2018-hyperprior (quality-3 architecture).

``ScaleHyperprior(N=128, M=192)`` with ``g_a``/``g_s`` taken, frozen, from the factorized demo
checkpoint (``--transforms``), and ``h_a``, ``h_s`` and the side bottleneck trained on the
pictures of :mod:`tools.train_bmshj2018`. With the transforms frozen the loss is the rate alone,
``y``'s computed exactly as the coder spends it (``-log2 P(round(y) | scales)``), so the latents
of every picture and its mirror (padded to 64) are computed once and each step trains on seeded
random latent crops. ``z`` reaches ``h_s`` rounded about its medians (straight-through), as the
decoder sees it. ``--from`` starts the hyperprior from an earlier checkpoint. The checkpoint is
stored and checked as the factorized one is.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import blake3
import numpy as np
import torch

from wai_dispatch.tools._compressai import checkpoint_state_dict, scale_hyperprior
from wai_dispatch.tools.train_bmshj2018 import (
    HELD_OUT_IMAGES,
    TRAIN_IMAGES,
    RunLog,
    finish,
    initial_state,
    load_image,
    options,
    pad_to,
    to_tensor,
    train,
)

STEM = "bmshj2018-hyperprior-demo-q3"
FACTORIZED = Path(__file__).resolve().parent.parent / "conformance/weights/bmshj2018-demo-q3.pt"


class LatentSampler:
    """Random crops of the cached latents (uniform over pictures, then mirror, then position)."""

    def __init__(self, latents: list[tuple[torch.Tensor, torch.Tensor]], crop: int, seed: int):
        self.latents = latents
        self.crop = crop
        self.rng = np.random.default_rng(seed)

    def batch(self, size: int) -> torch.Tensor:
        out = torch.empty(size, self.latents[0][0].shape[0], self.crop, self.crop)
        for i in range(size):
            pair = self.latents[int(self.rng.integers(len(self.latents)))]
            y = pair[int(self.rng.integers(2))]
            _, h, w = y.shape
            r = int(self.rng.integers(h - self.crop + 1))
            c = int(self.rng.integers(w - self.crop + 1))
            out[i] = y[:, r : r + self.crop, c : c + self.crop]
        return out


def side_and_scales(net: Any, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``z``'s likelihoods (noise in training) and the scales ``h_s`` gives from rounded ``z``."""
    z = net.h_a(torch.abs(y))
    _, z_lk = net.entropy_bottleneck(z)
    medians = net.entropy_bottleneck._get_medians().detach().reshape(1, -1, 1, 1)
    z_round = torch.round(z - medians) + medians
    z_hat = z + (z_round - z).detach()  # straight-through: the decoder's z, z's gradient
    return z_lk, net.h_s(z_hat)


def latent_bits(net: Any, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bits of ``round(y)`` given the scales (exact, as coded) and of ``z`` (its likelihoods)."""
    z_lk, scales = side_and_scales(net, y)
    _, y_lk = net.gaussian_conditional(torch.round(y), scales, training=False)
    return -torch.log2(y_lk).sum(), -torch.log2(z_lk).sum()


@torch.no_grad()
def estimate(net: Any, latents: dict[str, tuple[torch.Tensor, int]]) -> dict[str, float]:
    """Progress: the held-out pictures' bpp from the likelihoods (continuous scales)."""
    net.eval()
    res = {}
    for name, (y, pixels) in latents.items():
        bits_y, bits_z = latent_bits(net, y)
        res[name] = round(float(bits_y + bits_z) / pixels, 4)
    net.train()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    start_from = "start h_a, h_s and the bottleneck from this hyperprior checkpoint"
    options(ap, minutes=30.0, lr=1e-3, batch=16, start_from=start_from)
    ap.add_argument(
        "--latent-crop", type=int, default=16, help="latent crop side (16 = a 256-pixel crop)"
    )
    ap.add_argument("--transforms", type=Path, default=FACTORIZED, help="factorized checkpoint")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log = RunLog(args.out / f"{STEM}.train.log")
    log.start(
        "wai_dispatch.tools.train_bmshj2018_hyperprior",
        argv,
        args,
        architecture="compressai.models.ScaleHyperprior(N=128, M=192)",
        transforms_from=args.transforms.name,
        transforms_blake3=blake3.blake3(args.transforms.read_bytes()).hexdigest(),
    )
    held_out = {n: load_image(n) for n in HELD_OUT_IMAGES}

    net: Any = scale_hyperprior(128, 192)
    factorized = checkpoint_state_dict(
        torch.load(args.transforms, map_location="cpu", weights_only=True)
    )
    transforms = {k: v for k, v in factorized.items() if k.startswith(("g_a.", "g_s."))}
    missing = net.load_state_dict(transforms, strict=False)
    assert not missing.unexpected_keys, missing.unexpected_keys
    if args.init_from is not None:
        # The learned weights only: the bounds are the architecture's constants (a float16
        # checkpoint holds the likelihood bound 1e-9 as 0) and the tables are rebuilt.
        hyper_state = {
            k: v
            for k, v in initial_state(args.init_from, log).items()
            if not k.startswith(("g_a.", "g_s.")) and not k.endswith(".bound")
        }
        net.load_state_dict(hyper_state, strict=False)
    for name, p in net.named_parameters():
        if name.startswith(("g_a.", "g_s.")):
            p.requires_grad_(False)
    net.eval()
    with torch.no_grad():
        cached = []
        for n in TRAIN_IMAGES:
            x = pad_to(to_tensor(load_image(n)), 64)
            cached.append((net.g_a(x)[0], net.g_a(x.flip(3))[0]))
        held_latents = {
            n: (net.g_a(pad_to(to_tensor(img), 64)), img.shape[0] * img.shape[1])
            for n, img in held_out.items()
        }
    log("latents_cached", shapes=[list(a.shape) for a, _ in cached])
    sampler = LatentSampler(cached, args.latent_crop, args.seed)
    net.train()
    net.g_a.eval()
    net.g_s.eval()

    log("estimate", step=0, held_out_est_bpp=estimate(net, held_latents))

    def losses() -> tuple[torch.Tensor, dict[str, float]]:
        y = sampler.batch(args.batch)
        bits_y, bits_z = latent_bits(net, y)
        pixels = y.shape[0] * (16 * y.shape[2]) * (16 * y.shape[3])
        bpp_y, bpp_z = bits_y / pixels, bits_z / pixels
        return bpp_y + bpp_z, {"bpp_y": bpp_y.item(), "bpp_z": bpp_z.item()}

    def report(mean: dict[str, float]) -> dict[str, float]:
        return {"bpp_y": round(mean["bpp_y"], 4), "bpp_z": round(mean["bpp_z"], 4)}

    train(
        net,
        args,
        log,
        losses,
        report,
        200,
        lambda: {"held_out_est_bpp": estimate(net, held_latents)},
    )
    return finish(net, held_out, args.out / f"{STEM}.pt", log, 64)


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
