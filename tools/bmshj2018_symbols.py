"""The bmshj2018 set writers' payload picture and symbols, and the check of a plain synthesis
against CompressAI's ``g_s`` (§6.1): the picture a set's payload codes (drawn from the seed),
its symbols from CompressAI's float encoder and from the exact analysis, and the check latents a
plain synthesis must reproduce bit for bit.  Used by ``wai_bmshj2018_npu_set``,
``wai_bmshj2018_hyperprior_set``, the integer set's tools and the neural corpus writer."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from wai_dispatch.tools.bmshj2018_model import SetWriterError, SynthesisMismatch
from wai_dispatch.tools.int_synth_exact import ExactAnalysis
from wai_dispatch.tools.train_bmshj2018 import HELD_OUT_IMAGES, TRAIN_IMAGES, load_image

PICTURE_SIZE = 256  # the payload's picture, and the Core ML program's fixed input (its latent)
CHECK_IMAGES = ("astronaut", "chelsea", "coffee")
CHECK_SEED = 1802  # the random check latents: fixed, independent of the payload's seed


def payload_picture(seed: int) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
    """The payload's picture: a 256x256 crop of one of the pictures the demo weights were not
    trained on, image and offset drawn by ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    name = HELD_OUT_IMAGES[int(rng.integers(len(HELD_OUT_IMAGES)))]
    image = np.ascontiguousarray(load_image(name))
    top = int(rng.integers(0, image.shape[0] - PICTURE_SIZE + 1))
    left = int(rng.integers(0, image.shape[1] - PICTURE_SIZE + 1))
    crop = image[top : top + PICTURE_SIZE, left : left + PICTURE_SIZE]
    source = {
        "image": f"skimage.data.{name}",
        "top": top,
        "left": left,
        "height": PICTURE_SIZE,
        "width": PICTURE_SIZE,
        "draw": "numpy.random.default_rng(seed): image index, then top, then left",
    }
    return np.ascontiguousarray(crop), source


def crops(
    rng: np.random.Generator, n: int, size: int, names: Iterable[str] = TRAIN_IMAGES
) -> Iterator[npt.NDArray[np.uint8]]:
    """``n`` crops ``size`` pixels square of each picture (the training pictures: the integer
    programs' calibration), each position drawn from ``rng``, top then left."""
    for name in names:
        image = load_image(name)
        h, w = image.shape[:2]
        for _ in range(n):
            top = int(rng.integers(0, h - size + 1))
            left = int(rng.integers(0, w - size + 1))
            yield np.ascontiguousarray(image[top : top + size, left : left + size])


def encode_symbols(model: Any, picture: npt.NDArray[np.uint8]) -> tuple[Any, float]:
    """The symbols of ``g_a(picture)``, as CompressAI's ``EntropyBottleneck.compress`` computes
    them (``round(y - median)``, int32), and the smallest distance of ``y - median`` from a
    rounding boundary (how far the encoder's float arithmetic is from flipping a symbol)."""

    eb = model.entropy_bottleneck
    with torch.no_grad():
        y = model.g_a(torch.from_numpy(picture).permute(2, 0, 1)[None].float().div(255.0))
        medians = eb._get_medians().detach()
        medians = eb._extend_ndims(medians, 2).expand(y.size(0), *([-1] * 3))
        symbols = eb.quantize(y, "symbols", medians)
        # Cross-check against CompressAI's own coder: the latent it decodes is symbol + median.
        strings = eb.compress(y)
        decoded = eb.decompress(strings, y.shape[2:])
    if not torch.equal(decoded, symbols.float() + medians):
        raise SetWriterError("CompressAI's compress/decompress disagrees with round(y - median)")
    frac = (y - medians).double()
    margin = float((frac - torch.floor(frac) - 0.5).abs().min())
    return symbols.to(torch.int32), margin


def exact_symbols(model: Any, picture: npt.NDArray[np.uint8]) -> tuple[Any, float]:
    """The payload's symbols ``round(y − median)`` with ``y = g_a(picture)`` computed in exact
    arithmetic (tools/int_synth_exact.py: the same bits on every CPU), int32, and the smallest
    distance of ``y − median`` from a rounding boundary."""

    analysis = ExactAnalysis(model)
    frac = analysis.latent(picture) - analysis.medians[None, :, None, None]
    margin = float(np.abs(frac - np.floor(frac) - 0.5).min())
    return np.rint(frac).astype(np.int32), margin


def check_latents(model: Any, seed: int = CHECK_SEED) -> Iterator[Any]:
    """Latents with real spread: CompressAI's quantized latents (symbol + median) of crops of
    natural pictures, then integer symbols drawn per channel with those latents' spread (and a
    heavier tail), on a square and a non-square shape.  Yielded one by one, so a refusal comes
    at the first latent that differs."""
    eb = model.entropy_bottleneck
    medians = eb._get_medians().detach().reshape(1, -1, 1, 1)
    symbols = []
    for name in CHECK_IMAGES:
        image = np.ascontiguousarray(load_image(name))
        top, left = (image.shape[0] - PICTURE_SIZE) // 2, (image.shape[1] - PICTURE_SIZE) // 2
        s, _ = encode_symbols(model, image[top : top + PICTURE_SIZE, left : left + PICTURE_SIZE])
        symbols.append(s)
        yield s.float() + medians
    spread = torch.cat(symbols, dim=0).float().std(dim=(0, 2, 3)).numpy()
    rng = np.random.default_rng(seed)
    for shape, scale in (((16, 16), 1.0), ((12, 20), 3.0)):
        draw = rng.normal(size=(1, spread.size, *shape)) * (scale * spread + 0.5)[:, None, None]
        s = torch.from_numpy(np.rint(draw).astype(np.int32))
        yield s.float() + medians


def check_plain_synthesis(model: Any, plain: Any, latents: Iterable[Any]) -> None:
    """Refuse (§6.1) a plain synthesis that differs from ``g_s`` by any amount on any latent."""
    with torch.no_grad():
        for i, latent in enumerate(latents):
            ref, out = model.g_s(latent), plain(latent)
            if not torch.equal(ref, out):
                diff = (ref - out).abs()
                raise SynthesisMismatch(
                    f"the plain synthesis differs from CompressAI's g_s on check latent {i} "
                    f"(shape {tuple(latent.shape)}): {int((diff > 0).sum())} of {diff.numel()} "
                    f"values, max abs {float(diff.max()):.3g}; the set is not written"
                )
