"""Train the project's own demo weights for bmshj2018-hyperprior (quality-3 architecture).

``ScaleHyperprior(N=128, M=192)`` (CompressAI's ``bmshj2018_hyperprior`` at qualities 1-5), with
the analysis and synthesis transforms ``g_a``/``g_s`` taken, frozen, from the factorized demo
checkpoint (``conformance/weights/bmshj2018-demo-q3.pt``), and the hyperprior (``h_a``, ``h_s``
and the side latent's entropy bottleneck) trained on the same pictures, crops and seeded data
order as :mod:`tools.train_bmshj2018`. With the transforms frozen the distortion is fixed, so
the loss is the rate alone: ``bpp(y | z) + bpp(z)`` from the model's likelihoods, plus the
bottleneck's auxiliary (quantile) loss by its own optimiser. That makes a short CPU run enough.

The checkpoint is stored as the factorized one is (float tensors float16, rounded before
``update(force=True)``; reloaded and checked; BLAKE3 sidecar).

Run: ``python -m wai_dispatch.tools.train_bmshj2018_hyperprior --out DIR --steps N [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, TextIO, cast

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torch.nn.functional as F

from wai_dispatch.tools._compressai import checkpoint_state_dict, scale_hyperprior
from wai_dispatch.tools.train_bmshj2018 import (
    HELD_OUT_IMAGES,
    TRAIN_IMAGES,
    CropSampler,
    load_image,
    psnr_rgb8,
    round_to_float16_,
    save_checkpoint,
    to_tensor,
)

STEM = "bmshj2018-hyperprior-demo-q3"
FACTORIZED = Path(__file__).resolve().parent.parent / "conformance/weights/bmshj2018-demo-q3.pt"


def pad64(x: torch.Tensor) -> torch.Tensor:
    h, w = x.shape[2:]
    ph, pw = (-h) % 64, (-w) % 64
    return F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x


@torch.no_grad()
def evaluate(
    net: Any, images: dict[str, np.ndarray]
) -> tuple[dict[str, dict[str, float]], dict[str, list[bytes]]]:
    """Real entropy coding (CompressAI's float model), padded to a multiple of 64."""
    net.eval()
    res: dict[str, dict[str, float]] = {}
    streams: dict[str, list[bytes]] = {}
    for name, img in images.items():
        h, w = img.shape[:2]
        enc = net.compress(pad64(to_tensor(img)))
        dec = net.decompress(enc["strings"], enc["shape"])
        nbytes = sum(len(s) for group in enc["strings"] for s in group)
        rec = dec["x_hat"][0, :, :h, :w].clamp(0, 1).mul(255).round().byte().permute(1, 2, 0)
        res[name] = {
            "height": h,
            "width": w,
            "bytes": nbytes,
            "bpp": round(nbytes * 8 / (h * w), 4),
            "psnr": round(psnr_rgb8(img, rec.numpy()), 3),
        }
        streams[name] = [s for group in enc["strings"] for s in group]
    return res, streams


def load_checkpoint(path: Path) -> torch.nn.Module:
    """Load a checkpoint into ScaleHyperprior(128, 192) as float32 and rebuild its CDFs."""
    state = checkpoint_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    net: Any = scale_hyperprior(128, 192)
    net.load_state_dict(state)
    net.update(force=True)
    return cast(torch.nn.Module, net.eval())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eb-lr-mult", type=float, default=10.0)
    ap.add_argument("--aux-lr", type=float, default=1e-2)
    ap.add_argument("--decay-at", type=float, default=0.85)
    ap.add_argument("--crop", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log_file: TextIO = (args.out / f"{STEM}.train.log").open("w")
    t0 = time.monotonic()

    def log(event: str, **fields: Any) -> None:
        line = json.dumps({"t": round(time.monotonic() - t0, 1), "event": event, **fields})
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    arguments = argv if argv is not None else sys.argv[1:]
    log(
        "start",
        command="python -m wai_dispatch.tools.train_bmshj2018_hyperprior "
        + " ".join(shlex.quote(a) for a in arguments),
        utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        torch=torch.__version__,
        config={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        train_images=list(TRAIN_IMAGES),
        held_out_images=list(HELD_OUT_IMAGES),
        architecture="compressai.models.ScaleHyperprior(N=128, M=192)",
        transforms_from=FACTORIZED.name,
    )
    sampler = CropSampler([load_image(n) for n in TRAIN_IMAGES], args.crop, args.seed)
    held_out = {n: load_image(n) for n in HELD_OUT_IMAGES}

    net: Any = scale_hyperprior(128, 192)
    factorized = checkpoint_state_dict(
        torch.load(FACTORIZED, map_location="cpu", weights_only=True)
    )
    transforms = {k: v for k, v in factorized.items() if k.startswith(("g_a.", "g_s."))}
    missing = net.load_state_dict(transforms, strict=False)
    assert not missing.unexpected_keys, missing.unexpected_keys
    for name, p in net.named_parameters():
        if name.startswith(("g_a.", "g_s.")):
            p.requires_grad_(False)
    net.train()
    net.g_a.eval()
    net.g_s.eval()

    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    density = [
        p for n, p in named if n.startswith("entropy_bottleneck.") and not n.endswith(".quantiles")
    ]
    hyper = [p for n, p in named if not n.startswith("entropy_bottleneck.")]
    aux_params = [p for n, p in named if n.endswith(".quantiles")]
    mults = [1.0, args.eb_lr_mult]
    opt = torch.optim.Adam(
        [{"params": hyper, "lr": args.lr}, {"params": density, "lr": args.lr * args.eb_lr_mult}]
    )
    aux_opt = torch.optim.Adam(aux_params, lr=args.aux_lr)

    acc = {"bpp_y": 0.0, "bpp_z": 0.0, "aux": 0.0, "n": 0}
    t_train = time.monotonic()
    decayed = False
    for step in range(1, args.steps + 1):
        if not decayed and step / args.steps >= args.decay_at:
            for g, m in zip(opt.param_groups, mults, strict=True):
                g["lr"] = args.lr * m / 10
            decayed = True
            log("lr_decay", step=step)
        x = sampler.batch(args.batch)
        with torch.no_grad():
            y = net.g_a(x)
        opt.zero_grad(set_to_none=True)
        aux_opt.zero_grad(set_to_none=True)
        z = net.h_a(torch.abs(y))
        _, z_lk = net.entropy_bottleneck(z)
        z_tilde = net.entropy_bottleneck.quantize(z, "noise")
        scales = net.h_s(z_tilde)
        _, y_lk = net.gaussian_conditional(y, scales)
        pixels = x.shape[0] * x.shape[2] * x.shape[3]
        bpp_y = torch.log(y_lk).sum() / (-math.log(2) * pixels)
        bpp_z = torch.log(z_lk).sum() / (-math.log(2) * pixels)
        loss: Any = bpp_y + bpp_z  # Tensor.backward is untyped in torch 2.13
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hyper + density, 1.0)
        opt.step()
        aux = net.aux_loss()
        aux.backward()
        aux_opt.step()
        acc["bpp_y"] += bpp_y.item()
        acc["bpp_z"] += bpp_z.item()
        acc["aux"] += aux.item()
        acc["n"] += 1
        if step % 50 == 0:
            n = acc["n"]
            log(
                "train",
                step=step,
                bpp_y=round(acc["bpp_y"] / n, 4),
                bpp_z=round(acc["bpp_z"] / n, 4),
                aux=round(acc["aux"] / n, 2),
                steps_per_s=round(step / (time.monotonic() - t_train), 3),
            )
            acc = {k: 0.0 for k in acc} | {"n": 0}
    log("trained", steps=args.steps, train_wall_s=round(time.monotonic() - t_train, 1))

    net.eval()
    net.update(force=True)
    res32, _ = evaluate(net, held_out)
    log("held_out_float32", held_out=res32)
    round_to_float16_(net)
    net.update(force=True)
    ckpt = args.out / f"{STEM}.pt"
    digest = save_checkpoint(net, ckpt)
    res_saved, streams_saved = evaluate(net, held_out)
    loaded = load_checkpoint(ckpt)
    res16, streams16 = evaluate(loaded, held_out)
    same_tables = all(
        torch.equal(loaded.state_dict()[k], net.state_dict()[k])
        for k in net.state_dict()
        if k.split(".")[-1] in ("_quantized_cdf", "_cdf_length", "_offset")
    )
    same = streams16 == streams_saved and res16 == res_saved
    log(
        "held_out_float16_checkpoint",
        held_out=res16,
        cdf_tables_identical_after_reload=same_tables,
        bitstreams_identical_to_pre_save=same,
        checkpoint=ckpt.name,
        checkpoint_bytes=ckpt.stat().st_size,
        blake3=digest,
        total_wall_s=round(time.monotonic() - t0, 1),
    )
    log_file.close()
    return 0 if same_tables and same else 1


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
