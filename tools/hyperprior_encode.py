"""The hyperprior's encoder (docs/bmshj2018-hyperprior-set.md): picture → ``WAIH`` payload, with
the very integer hyper-synthesis the decoder runs.

:func:`encode_hyperprior` takes a set and an RGB8 picture (sides multiples of 64) and the
checkpoint the set was written from (a set carries no analysis); ``g_a`` and ``h_a`` run in exact
arithmetic (tools/int_synth_exact.py), so the payload is a pure function of the picture, the
checkpoint and the set on every CPU. z's symbols are clamped to the program's declared input
range (the decoder would refuse one outside it).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.sets import LoadedSet, Manifest, load
from wai_dispatch.codec.sets.errors import SetCapabilityMismatch
from wai_dispatch.dispatch.errors import InvalidArgument
from wai_dispatch.service.decoding.hyperprior import HyperStage
from wai_dispatch.setfacts.limits import Limits
from wai_dispatch.tools._compressai import checkpoint_state_dict, scale_hyperprior
from wai_dispatch.tools.bmshj2018_model import architecture_of
from wai_dispatch.tools.encoder import Coded, EncodeJob
from wai_dispatch.tools.int_synth_exact import ExactAnalysis, ExactConv, Report, Steps

DEMO_CHECKPOINT = (
    Path(__file__).resolve().parent.parent / "conformance/weights/bmshj2018-hyperprior-demo-q3.pt"
)
#: The picture's height and width must be multiples of this (g_a and h_a: 2^6).
MULTIPLE = 64


def architecture(quality: int) -> tuple[int, int]:
    """CompressAI's (N, M) of bmshj2018_hyperprior at ``quality``."""
    if not 1 <= quality <= 8:
        raise ValueError(f"quality {quality}: bmshj2018-hyperprior has qualities 1 to 8")
    return (128, 192) if quality <= 5 else (192, 320)


def read_hyper_model(path: str | os.PathLike[str], quality: int = 3) -> tuple[Any, Any]:
    """ScaleHyperprior(N, M) (the widths its state dict holds, else ``quality``'s) from a
    checkpoint (a bare state dict, or one under ``network``/``state_dict``, ``module.``
    prefixes dropped), float32, eval, before ``update()``; and the state dict it was read from."""
    state = checkpoint_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    n, m = architecture_of(state, architecture(quality))
    net: Any = scale_hyperprior(n, m)
    net.load_state_dict(state)
    return net.eval(), state


def load_hyper_model(path: str | os.PathLike[str], quality: int = 3) -> Any:
    """:func:`read_hyper_model`'s model with its tables kept as stored (cut here only when it
    has none: the encoder's tools; the set writer refuses that, tools/bmshj2018_model.py
    ``update_tables``)."""
    net, state = read_hyper_model(path, quality)
    empty = state.get("gaussian_conditional._quantized_cdf")
    net.update(force=empty is None or empty.numel() == 0)
    return net


class HyperAnalysis:
    """``g_a`` then ``h_a`` of a ScaleHyperprior, exact on fixed-point grids."""

    def __init__(self, model: Any) -> None:
        self.g_a = ExactAnalysis(model)
        state = model.state_dict()

        def conv(i: int, kind: str) -> ExactConv:
            return ExactConv(
                state[f"h_a.{i}.weight"].detach().numpy(),
                state[f"h_a.{i}.bias"].detach().numpy(),
                kind,
            )

        self.h_a = [conv(0, "conv3"), conv(2, "conv"), conv(4, "conv")]
        quantiles = state["entropy_bottleneck.quantiles"].detach().numpy()
        self.z_medians = quantiles[:, 0, 1].astype(np.float64)

    #: The stages :meth:`latents` reports (g_a's, then h_a's three convolutions).
    STAGES = ExactAnalysis.STAGES + 3

    def latents(
        self, picture: np.ndarray, steps: Steps | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(y, z − median)`` in float64 for an RGB8 picture (HWC)."""
        steps = steps or Steps(None, self.STAGES)
        y = self.g_a.latent(picture, steps)
        x = np.abs(y)
        for i, c in enumerate(self.h_a):
            x = c(x, on_strip=steps.stage(f"h_a conv {i + 1}/3"))
            if i < 2:
                x = np.maximum(x, 0.0)
        return y, x - self.z_medians[None, :, None, None]


def open_folder(folder: str | os.PathLike[str]) -> LoadedSet:
    """A set folder (``set.json`` and its files), verified."""
    directory = Path(folder)
    manifest = Manifest.from_bytes((directory / "set.json").read_bytes())
    return load(directory, manifest.digest)


@lru_cache(maxsize=4)
def _analysis(path: str, quality: int) -> HyperAnalysis:
    return HyperAnalysis(load_hyper_model(path, quality))


def encode_hyperprior(
    loaded_set_or_dir: LoadedSet | str | os.PathLike[str],
    rgb: np.ndarray,
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    quality: int | None = None,
) -> bytes:
    """The ``WAIH`` payload of ``rgb`` (uint8 H×W×3, H and W multiples of 64) for the set.
    Bad input is a typed :class:`CodecError`: ``invalid_argument`` (the picture),
    ``set_capability_mismatch`` (a set that is not a hyperprior set)."""
    files = (
        loaded_set_or_dir
        if isinstance(loaded_set_or_dir, LoadedSet)
        else open_folder(loaded_set_or_dir)
    )
    stage = HyperStage.of(files)
    if stage is None:
        raise SetCapabilityMismatch(
            f"set {files.digest[:16]}… is {files.capability}'s, not a hyperprior set",
        )
    picture = np.ascontiguousarray(rgb)
    if picture.dtype != np.uint8 or picture.ndim != 3 or picture.shape[2] != 3:
        raise InvalidArgument(
            f"the picture must be uint8 H×W×3, not {picture.dtype} {picture.shape}",
        )
    if picture.shape[0] % MULTIPLE or picture.shape[1] % MULTIPLE:
        raise InvalidArgument(
            f"the picture's height and width ({picture.shape[0]}×{picture.shape[1]}) must be "
            f"multiples of {MULTIPLE}",
        )
    q = quality if quality is not None else (files.facts.quality or 3)
    path = str(Path(checkpoint).resolve() if checkpoint is not None else DEMO_CHECKPOINT)
    return encode_with(_analysis(path, q), stage, picture)


def encode_with(analysis: HyperAnalysis, stage: HyperStage, picture: np.ndarray) -> bytes:
    """The payload, from an analysis and a set's stage already opened."""
    return code_with(analysis, stage, picture)[0]


def code_with(
    analysis: HyperAnalysis,
    stage: HyperStage,
    picture: np.ndarray,
    size: tuple[int, int] | None = None,
    progress: Report = None,
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The payload and its symbols ``z`` and ``y`` (int32), from an analysis and a set's stage;
    ``size``: the picture's own (width, height) before padding, which the payload then carries
    (version 2); ``progress``: told ``(stages done, stages, note)`` as the work goes."""
    steps = Steps(progress, analysis.STAGES + 2)
    y, z_frac = analysis.latents(picture, steps)
    lo, hi = stage.program.input_range
    z = np.clip(np.rint(z_frac), lo, hi).astype(np.int32)
    y_symbols = np.rint(y, out=y).astype(np.int32)
    del y, z_frac  # the latent in float64: not held through the coding
    steps.stage("hyper-synthesis")
    indexes = stage.indexes(z, Limits())
    steps.stage("entropy coding")
    payload = waih.encode(z, y_symbols, indexes, stage.z_tables, stage.y_tables, picture=size)
    return payload, z, y_symbols


def encode(job: EncodeJob) -> Coded:
    """``wai-dispatch encode``'s entry for the capability (:data:`tools.encoder.ENCODERS`): the
    checkpoint the encoder resolved and verified against the set's record; the symbols
    digest over z then y, as the decoder reports it."""
    stage = HyperStage.of(job.files)
    if stage is None:
        raise SetCapabilityMismatch(
            f"set {job.files.digest[:16]}… is {job.files.capability}'s, not a hyperprior set",
        )
    quality = job.files.facts.quality or 3
    analysis = _analysis(str(job.checkpoint.path.resolve()), quality)
    picture = np.ascontiguousarray(job.picture)
    payload, z, y = code_with(analysis, stage, picture, job.picture_size, job.progress)
    return Coded(payload, y, waih.symbols_digest(z, y))
