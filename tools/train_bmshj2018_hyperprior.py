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
import time
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
    decay_when_due,
    finish,
    load_image,
    optimisers,
    pad_to,
    to_tensor,
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
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (overrides --minutes)")
    ap.add_argument("--minutes", type=float, default=30.0, help="training wall-time budget")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eb-lr-mult", type=float, default=10.0)
    ap.add_argument("--aux-lr", type=float, default=1e-2)
    ap.add_argument("--decay-at", type=float, default=0.85)
    ap.add_argument(
        "--latent-crop", type=int, default=16, help="latent crop side (16 = a 256-pixel crop)"
    )
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--transforms", type=Path, default=FACTORIZED, help="factorized checkpoint")
    ap.add_argument(
        "--from",
        dest="init_from",
        type=Path,
        default=None,
        metavar="CHECKPOINT",
        help="start h_a, h_s and the bottleneck from this hyperprior checkpoint",
    )
    ap.add_argument("--estimate-every", type=float, default=120.0)
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
        earlier = checkpoint_state_dict(
            torch.load(args.init_from, map_location="cpu", weights_only=True)
        )
        # The learned weights only: the bounds are the architecture's constants (a float16
        # checkpoint holds the likelihood bound 1e-9 as 0) and the tables are rebuilt.
        hyper_state = {
            k: v
            for k, v in earlier.items()
            if not k.startswith(("g_a.", "g_s.")) and not k.endswith(".bound")
        }
        net.load_state_dict(hyper_state, strict=False)
        log(
            "init_from",
            checkpoint=str(args.init_from),
            blake3=blake3.blake3(args.init_from.read_bytes()).hexdigest(),
        )
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

    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    opt, aux_opt, clipped = optimisers(named, args)
    log("estimate", step=0, held_out_est_bpp=estimate(net, held_latents))

    budget_s = args.minutes * 60.0
    acc = {"bpp_y": 0.0, "bpp_z": 0.0, "aux": 0.0, "n": 0}
    t_train = time.monotonic()
    next_estimate = args.estimate_every
    decayed = False
    step = 0
    while True:
        elapsed = time.monotonic() - t_train
        if (step >= args.steps) if args.steps else (elapsed >= budget_s):
            break
        progress = step / args.steps if args.steps else elapsed / budget_s
        if not decayed:
            decayed = decay_when_due(opt, args, progress, log, step)
        y = sampler.batch(args.batch)
        opt.zero_grad(set_to_none=True)
        aux_opt.zero_grad(set_to_none=True)
        bits_y, bits_z = latent_bits(net, y)
        pixels = y.shape[0] * (16 * y.shape[2]) * (16 * y.shape[3])
        bpp_y, bpp_z = bits_y / pixels, bits_z / pixels
        loss: Any = bpp_y + bpp_z  # Tensor.backward is untyped in torch 2.13
        loss.backward()
        torch.nn.utils.clip_grad_norm_(clipped, 1.0)
        opt.step()
        aux = net.aux_loss()
        aux.backward()
        aux_opt.step()
        step += 1
        acc["bpp_y"] += bpp_y.item()
        acc["bpp_z"] += bpp_z.item()
        acc["aux"] += aux.item()
        acc["n"] += 1
        if step % 200 == 0:
            count = acc["n"]
            log(
                "train",
                step=step,
                bpp_y=round(acc["bpp_y"] / count, 4),
                bpp_z=round(acc["bpp_z"] / count, 4),
                aux=round(acc["aux"] / count, 2),
                steps_per_s=round(step / (time.monotonic() - t_train), 3),
            )
            acc = {k: 0.0 for k in acc} | {"n": 0}
        if time.monotonic() - t_train >= next_estimate:
            next_estimate += args.estimate_every
            log("estimate", step=step, held_out_est_bpp=estimate(net, held_latents))
    log("trained", steps=step, train_wall_s=round(time.monotonic() - t_train, 1))
    return finish(net, held_out, args.out / f"{STEM}.pt", log, 64)


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
