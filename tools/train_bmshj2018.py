"""Train the project's own demo weights for bmshj2018-factorized (quality-3 architecture).

No pretrained weights can be downloaded here, so the project trains ``FactorizedPrior(N=128,
M=192)`` on random crops of the colour pictures inside the scikit-image wheel
(:data:`TRAIN_IMAGES`; :data:`HELD_OUT_IMAGES` only evaluate; ``cat`` is ``chelsea`` and never
trains), with CompressAI's rate-distortion loss and a separate optimiser for the auxiliary
(quantile) loss, as in its ``examples/train.py``. Crops come from a generator seeded by
``--seed``; with ``--steps`` the run is fully determined, with ``--minutes`` machine-dependent.

The checkpoint stores floating tensors as float16, rounded *before* ``update(force=True)`` builds
the CDF tables, so the stored tables are exactly what a reload recomputes; the script reloads
it, checks the bitstreams are identical and writes a BLAKE3 sidecar. ``--from CHECKPOINT``
continues from a checkpoint's weights (the optimisers start afresh).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, cast

# On a shared, oversubscribed CPU OpenMP's spinning workers waste most of the time (measured
# here: 7.4 s/step with 2 spinning threads, 1.5 s passive, 0.7 s with one thread), so waiting
# threads sleep unless the caller says otherwise, and the default is one thread.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import blake3
import numpy as np
import torch
import torch.nn.functional as F

from wai_dispatch.tools._compressai import checkpoint_state_dict, factorized_prior

TRAIN_IMAGES = (
    "astronaut",
    "rocket",
    "immunohistochemistry",
    "hubble_deep_field",
    "retina",
    "stereo_motorcycle[0]",
    "stereo_motorcycle[1]",
)
HELD_OUT_IMAGES = ("chelsea", "coffee")
STEM = "bmshj2018-demo-q3"


def load_image(name: str) -> np.ndarray:
    """Load a scikit-image sample (``name``, or ``name[i]`` for tuple returns) as HxWx3 uint8."""
    import skimage.data

    index: int | None = None
    if name.endswith("]"):
        name, _, rest = name.partition("[")
        index = int(rest[:-1])
    data: Any = getattr(skimage.data, name)()
    if index is not None:
        data = data[index]
    img = np.asarray(data)
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ValueError(f"{name}: expected HxWx3 uint8, got {img.shape} {img.dtype}")
    return img


def to_tensor(img: np.ndarray) -> torch.Tensor:
    """HxWx3 uint8 -> 1x3xHxW float32 in [0, 1]."""
    return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).float().div_(255.0)[None]


class CropSampler:
    """Deterministic random crops (uniform over pictures, then position, then flip)."""

    def __init__(self, images: list[np.ndarray], crop: int, seed: int) -> None:
        self.images = [to_tensor(img)[0] for img in images]
        self.crop = crop
        self.rng = np.random.default_rng(seed)

    def batch(self, size: int) -> torch.Tensor:
        out = torch.empty(size, 3, self.crop, self.crop)
        for i in range(size):
            img = self.images[int(self.rng.integers(len(self.images)))]
            _, h, w = img.shape
            y = int(self.rng.integers(h - self.crop + 1))
            x = int(self.rng.integers(w - self.crop + 1))
            patch = img[:, y : y + self.crop, x : x + self.crop]
            if self.rng.random() < 0.5:
                patch = patch.flip(2)
            out[i] = patch
        return out


def pad_to(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Pad by edge replication to a multiple of ``multiple`` pixels."""
    h, w = x.shape[2:]
    ph, pw = (-h) % multiple, (-w) % multiple
    return F.pad(x, (0, pw, 0, ph), mode="replicate") if ph or pw else x


def rgb8_of(x_hat: torch.Tensor, height: int, width: int) -> np.ndarray:
    """A model's ``x_hat`` (1×3×H×W in [0, 1], padded) as the ``height × width`` RGB8 picture."""
    out = x_hat[0, :, :height, :width].clamp(0, 1).mul(255).round().byte().permute(1, 2, 0)
    return np.ascontiguousarray(out.numpy())


def psnr_rgb8(ref: np.ndarray, rec: np.ndarray) -> float:
    mse = float(np.mean((ref.astype(np.float64) - rec.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * math.log10(255.0**2 / mse)


@torch.no_grad()
def estimate(net: torch.nn.Module, images: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Cheap progress estimate: likelihood bpp and PSNR of the float (noise-free) forward pass."""
    net.eval()
    res: dict[str, dict[str, float]] = {}
    for name, img in images.items():
        h, w = img.shape[:2]
        out = net(pad_to(to_tensor(img), 16))
        bits = sum(-torch.log2(lk).sum() for lk in out["likelihoods"].values())
        rec = rgb8_of(out["x_hat"], h, w)
        res[name] = {
            "est_bpp": round(float(bits) / (h * w), 4),
            "psnr": round(psnr_rgb8(img, rec), 3),
        }
    net.train()
    return res


@torch.no_grad()
def evaluate(
    net: Any, images: dict[str, np.ndarray], multiple: int = 16
) -> tuple[dict[str, dict[str, float]], dict[str, list[bytes]]]:
    """Real entropy coding, padded to ``multiple``: bpp and RGB8 PSNR per picture, and streams."""
    net.eval()
    res: dict[str, dict[str, float]] = {}
    streams: dict[str, list[bytes]] = {}
    for name, img in images.items():
        h, w = img.shape[:2]
        enc = net.compress(pad_to(to_tensor(img), multiple))
        dec = net.decompress(enc["strings"], enc["shape"])
        nbytes = sum(len(s) for group in enc["strings"] for s in group)
        rec = rgb8_of(dec["x_hat"], h, w)
        res[name] = {
            "height": h,
            "width": w,
            "bytes": nbytes,
            "bpp": round(nbytes * 8 / (h * w), 4),
            "psnr": round(psnr_rgb8(img, rec), 3),
        }
        streams[name] = [s for group in enc["strings"] for s in group]
    return res, streams


def round_to_float16_(net: torch.nn.Module) -> None:
    """Round every floating parameter and buffer to float16 precision (kept as float32)."""
    with torch.no_grad():
        for t in list(net.parameters()) + list(net.buffers()):
            if t.is_floating_point():
                t.copy_(t.half().float())


def save_checkpoint(net: torch.nn.Module, path: Path) -> str:
    """Save the state dict with float tensors as float16; write and return the BLAKE3 digest."""

    state = {
        k: (v.half() if v.is_floating_point() else v).clone() for k, v in net.state_dict().items()
    }
    torch.save(state, path)
    digest = blake3.blake3(path.read_bytes()).hexdigest()
    path.with_name(path.name + ".blake3").write_text(digest + "\n")
    return digest


def load_checkpoint(
    path: Path, *, update_quantiles: bool = False, model: Callable[..., Any] = factorized_prior
) -> torch.nn.Module:
    """Load a checkpoint (read as :func:`checkpoint_state_dict` reads one) into ``model(128,
    192)`` as float32 and rebuild its CDFs."""
    state = checkpoint_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    net: Any = model(128, 192)
    net.load_state_dict(state)
    net.update(force=True, update_quantiles=update_quantiles)
    return cast(torch.nn.Module, net.eval())


def initial_state(path: Path, log: Callable[..., None]) -> dict[str, Any]:
    """The state dict of the checkpoint ``--from`` names (as :func:`checkpoint_state_dict`
    reads one), its path and BLAKE3 logged."""
    state = checkpoint_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    log("init_from", checkpoint=str(path), blake3=blake3.blake3(path.read_bytes()).hexdigest())
    return state


class RunLog:
    """Events as JSON lines on stdout and in ``path``, ``t`` in seconds since the start."""

    def __init__(self, path: Path) -> None:
        self.file: TextIO = path.open("w")
        self.t0 = time.monotonic()

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"t": round(time.monotonic() - self.t0, 1), "event": event, **fields})
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()

    def start(self, module: str, argv: list[str] | None, args: Any, **fields: Any) -> None:
        """The ``start`` event: the command line, the time, torch, the arguments, the pictures."""
        arguments = argv if argv is not None else sys.argv[1:]
        self(
            "start",
            command=f"python -m {module} " + " ".join(shlex.quote(a) for a in arguments),
            utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            torch=torch.__version__,
            config={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            train_images=list(TRAIN_IMAGES),
            held_out_images=list(HELD_OUT_IMAGES),
            **fields,
        )


def optimisers(
    named: list[tuple[str, torch.nn.Parameter]], args: Any
) -> tuple[torch.optim.Adam, torch.optim.Adam, list[torch.nn.Parameter]]:
    """Adam over the transforms and (at ``--eb-lr-mult`` times the rate) the bottleneck's
    density, a second Adam over its quantiles (the auxiliary loss); and the clipped parameters.

    The factorized density starts very wide (init_scale=10, about 4 bits per latent); at the
    transforms' learning rate it needs thousands of steps to narrow, which a short CPU budget
    does not have."""
    density = [
        p for n, p in named if n.startswith("entropy_bottleneck.") and not n.endswith(".quantiles")
    ]
    others = [p for n, p in named if not n.startswith("entropy_bottleneck.")]
    aux_params = [p for n, p in named if n.endswith(".quantiles")]
    opt = torch.optim.Adam(
        [{"params": others, "lr": args.lr}, {"params": density, "lr": args.lr * args.eb_lr_mult}]
    )
    return opt, torch.optim.Adam(aux_params, lr=args.aux_lr), others + density


def options(
    ap: argparse.ArgumentParser, *, minutes: float, lr: float, batch: int, start_from: str
) -> None:
    """Both trainers' options (each adds its own); ``start_from``: what ``--from`` loads."""
    ap.add_argument("--out", type=Path, required=True, help="output directory")
    ap.add_argument("--from", dest="init_from", type=Path, metavar="CHECKPOINT", help=start_from)
    ap.add_argument("--minutes", type=float, default=minutes, help="training wall-time budget")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (overrides --minutes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument(
        "--eb-lr-mult",
        type=float,
        default=10.0,
        help="lr multiplier of the entropy bottleneck's density",
    )
    ap.add_argument("--aux-lr", type=float, default=1e-2)
    ap.add_argument(
        "--decay-at", type=float, default=0.85, help="fraction of the budget after which lr /= 10"
    )
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--estimate-every", type=float, default=120.0, help="seconds between progress estimates"
    )


def train(
    net: Any,
    args: Any,
    log: RunLog,
    losses: Callable[[], tuple[torch.Tensor, dict[str, float]]],
    report: Callable[[dict[str, float]], dict[str, float]],
    every: int,
    estimate: Callable[[], dict[str, Any]],
    clipped: list[torch.nn.Parameter] | None = None,
) -> None:
    """Train until ``--steps`` or ``--minutes``: each step ``losses()`` (the loss, and figures to
    average), the gradients clipped to norm 1 (``clipped``'s, else :func:`optimisers`'), the
    auxiliary loss; every ``every`` steps the averages as ``report`` gives them, every
    ``--estimate-every`` seconds ``estimate()``; the rates drop tenfold at ``--decay-at``."""
    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    opt, aux_opt, clip = optimisers(named, args)
    budget_s = args.minutes * 60.0
    decayed = False
    step = 0
    next_estimate = args.estimate_every
    acc: dict[str, float] = {}
    count = 0
    t_train = time.monotonic()
    while True:
        elapsed = time.monotonic() - t_train
        if (step >= args.steps) if args.steps else (elapsed >= budget_s):
            break
        progress = step / args.steps if args.steps else elapsed / budget_s
        if not decayed and progress >= args.decay_at:
            for g, mult in zip(opt.param_groups, (1.0, args.eb_lr_mult), strict=True):
                g["lr"] = args.lr * mult / 10
            log("lr_decay", step=step, lr=args.lr / 10)
            decayed = True
        opt.zero_grad(set_to_none=True)
        aux_opt.zero_grad(set_to_none=True)
        loss, figures = losses()
        if not torch.isfinite(loss):
            log("skip_non_finite", step=step)
            continue
        loss.backward()  # type: ignore[no-untyped-call]  # untyped in torch 2.13
        torch.nn.utils.clip_grad_norm_(clip if clipped is None else clipped, 1.0)
        opt.step()
        aux = net.aux_loss()
        aux.backward()
        aux_opt.step()
        step += 1
        for key, value in {**figures, "aux": aux.item()}.items():
            acc[key] = acc.get(key, 0.0) + value
        count += 1
        if step % every == 0:
            means = {key: value / count for key, value in acc.items()}
            log(
                "train",
                step=step,
                **report(means),
                aux=round(means["aux"], 2),
                steps_per_s=round(step / (time.monotonic() - t_train), 3),
            )
            acc, count = {}, 0
        if time.monotonic() - t_train >= next_estimate:
            next_estimate += args.estimate_every
            log("estimate", step=step, **estimate())
    log("trained", steps=step, train_wall_s=round(time.monotonic() - t_train, 1))


def finish(
    net: Any, held_out: dict[str, np.ndarray], ckpt: Path, log: RunLog, multiple: int = 16
) -> int:
    """Evaluate the float32 model, round to float16, save, reload and check; 0 when the reload
    rebuilds the same CDF tables and the same bitstreams."""
    net.eval()
    net.update(force=True)
    res32, _ = evaluate(net, held_out, multiple)
    log("held_out_float32", held_out=res32)

    round_to_float16_(net)
    net.update(force=True)
    digest = save_checkpoint(net, ckpt)
    res_saved, streams_saved = evaluate(net, held_out, multiple)

    loaded = load_checkpoint(ckpt, model=type(net))
    res16, streams16 = evaluate(loaded, held_out, multiple)
    same_tables = all(
        torch.equal(loaded.state_dict()[k], net.state_dict()[k])
        for k in net.state_dict()
        if k.split(".")[-1] in ("_quantized_cdf", "_cdf_length", "_offset")
    )
    same_streams = streams16 == streams_saved and res16 == res_saved
    log(
        "held_out_float16_checkpoint",
        held_out=res16,
        cdf_tables_identical_after_reload=same_tables,
        bitstreams_identical_to_pre_save=same_streams,
        checkpoint=ckpt.name,
        checkpoint_bytes=ckpt.stat().st_size,
        blake3=digest,
        total_wall_s=round(time.monotonic() - log.t0, 1),
    )
    log.file.close()
    return 0 if same_tables and same_streams else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    start_from = "continue training from this checkpoint (a state dict as this script saves it)"
    options(ap, minutes=40.0, lr=5e-4, batch=8, start_from=start_from)
    ap.add_argument("--lmbda", type=float, default=0.025)
    ap.add_argument("--crop", type=int, default=96)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log = RunLog(args.out / f"{STEM}.train.log")
    log.start(
        "wai_dispatch.tools.train_bmshj2018",
        argv,
        args,
        architecture="compressai.models.FactorizedPrior(N=128, M=192)",
    )

    sampler = CropSampler([load_image(n) for n in TRAIN_IMAGES], args.crop, args.seed)
    held_out = {n: load_image(n) for n in HELD_OUT_IMAGES}

    net = factorized_prior(128, 192)
    if args.init_from is not None:
        # The weights only: the optimisers start afresh (Adam's moments are not stored).
        net.load_state_dict(initial_state(args.init_from, log))
    net.train()

    def losses() -> tuple[torch.Tensor, dict[str, float]]:
        x = sampler.batch(args.batch)
        out = net(x)
        num_pixels = x.shape[0] * x.shape[2] * x.shape[3]
        log_lk = cast(torch.Tensor, sum(torch.log(lk).sum() for lk in out["likelihoods"].values()))
        bpp = log_lk / (-math.log(2) * num_pixels)
        mse = F.mse_loss(out["x_hat"], x)
        loss = args.lmbda * 255.0**2 * mse + bpp
        return loss, {"loss": loss.item(), "mse": mse.item(), "bpp": bpp.item()}

    def report(mean: dict[str, float]) -> dict[str, float]:
        psnr = 10 * math.log10(1 / max(mean["mse"], 1e-12))
        return {
            "loss": round(mean["loss"], 4),
            "bpp": round(mean["bpp"], 4),
            "psnr": round(psnr, 3),
        }

    main_params = [p for n, p in net.named_parameters() if not n.endswith(".quantiles")]
    train(
        net,
        args,
        log,
        losses,
        report,
        50,
        lambda: {"held_out": estimate(net, held_out)},
        main_params,
    )
    return finish(net, held_out, args.out / f"{STEM}.pt", log)


if __name__ == "__main__":
    raise SystemExit(main())
