"""The encoder of the factorized-prior capabilities, ``wai.neural.bmshj2018`` and
``wai.neural.int_synth`` (docs/encode.md): the checkpoint's ``g_a`` in float32, quantised as
CompressAI's ``EntropyBottleneck.compress`` does with **the set's** medians and tables, coded by
:func:`codec.payload.encode`. For a ``wai-ops/1`` set the symbols are checked against the range
its program declares, which its decode would otherwise refuse."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from wai_dispatch.cli.errors import ToolsMissing
from wai_dispatch.codec import payload as payload_codec
from wai_dispatch.codec.sets import LoadedSet
from wai_dispatch.codec.tables import tables_of
from wai_dispatch.tools import analysis_strips as strips
from wai_dispatch.tools._compressai import checkpoint_state_dict, factorized_prior
from wai_dispatch.tools.encoder import TOOLS_HINT, Checkpoint, Coded, EncodeJob
from wai_dispatch.tools.errors import CheckpointRequired, EncodeUnsupported, SymbolsOutOfRange

#: The analyses loaded, by (checkpoint BLAKE3, N, M): a process that encodes many pictures
#: (a test, a batch) builds each once.
_ANALYSES: dict[tuple[str, int, int], Any] = {}
_LOCK = threading.Lock()


def encode(job: EncodeJob) -> Coded:
    """The payload of ``job.picture`` for ``job.files``' tables (an :data:`ENCODERS` entry)."""
    tables = tables_of(job.files)
    y = analysis(job.checkpoint, job.files, job.picture)
    symbols = quantize(y, tables.medians)
    _check_program_range(job.files, symbols)
    return Coded(payload_codec.encode(symbols, tables, picture=job.picture_size), symbols)


def quantize(y: npt.NDArray[np.float32], medians: npt.NDArray[np.float32]) -> npt.NDArray[np.int32]:
    """CompressAI's ``quantize(y, "symbols", medians)``: ``round(y − median)`` in float32,
    half to even (``torch.round``), as int32; ``y`` is 1×C×H×W."""
    diff = (
        np.asarray(y, dtype=np.float32) - np.asarray(medians, dtype=np.float32)[None, :, None, None]
    )
    symbols: npt.NDArray[np.int32] = np.rint(diff).astype(np.int32)
    return symbols


def analysis(
    checkpoint: Checkpoint, files: LoadedSet, picture: npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """``g_a`` of the checkpoint on the RGB8 picture (H×W×3, dimensions multiples of 16) as
    CompressAI's examples feed it: float32 samples / 255, N×C×H×W; the latent y, float32. In
    strips of latent rows (tools/analysis_strips.py) when the picture is taller than one."""
    torch = _torch()
    g_a = _analysis_of(checkpoint, files)
    height, width = picture.shape[:2]
    rows = strips.latent_rows(g_a[0].out_channels, width // 2, 8)
    layers = [strips.TorchLayer(m, alone=rows < -(-height // 16)) for m in g_a]
    shape = strips.heights(layers, height)[-1], strips.heights(layers, width)[-1]
    y = np.empty((1, g_a[-1].out_channels, *shape), dtype=np.float32)

    def pixels(lo: int, hi: int) -> Any:
        part = torch.from_numpy(np.ascontiguousarray(picture[lo:hi]))
        return part.permute(2, 0, 1)[None].float() / 255

    def put(a: int, b: int, v: Any) -> None:
        y[:, :, a:b] = v.numpy()

    with torch.inference_mode():
        strips.run(layers, pixels, height, rows, put)
    return y


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ToolsMissing(f"{TOOLS_HINT} ({exc})") from None
    return torch


def _architecture(files: LoadedSet) -> tuple[int, int]:
    extra = files.facts.model_extra or {}
    n, m = extra.get("N", 128), extra.get("M", files.facts.latent_channels or 192)
    if not (isinstance(n, int) and isinstance(m, int) and 1 <= n <= 4096 and 1 <= m <= 4096):
        raise EncodeUnsupported(
            f"set {files.name}: its facts N={n!r}, M={m!r} are not a FactorizedPrior's",
        )
    return n, m


def _analysis_of(checkpoint: Checkpoint, files: LoadedSet) -> Any:
    n, m = _architecture(files)
    key = (checkpoint.blake3, n, m)
    with _LOCK:
        g_a = _ANALYSES.get(key)
        if g_a is None:
            g_a = _load(checkpoint, n, m)
            _ANALYSES[key] = g_a
    return g_a


def _load(checkpoint: Checkpoint, n: int, m: int) -> Any:
    torch = _torch()
    try:
        net = factorized_prior(n, m)
    except ImportError as exc:
        raise ToolsMissing(f"{TOOLS_HINT} ({exc})") from None
    try:
        loaded = torch.load(io.BytesIO(checkpoint.data), map_location="cpu", weights_only=True)
        net.load_state_dict(checkpoint_state_dict(loaded))
    except Exception as exc:  # not a torch file, not a state dict, not this architecture
        line = " ".join(str(exc).split())[:300]
        raise CheckpointRequired(
            f"checkpoint {checkpoint.path} does not read as FactorizedPrior({n}, {m}): {line}",
        ) from None
    return net.g_a.eval()


def _check_program_range(files: LoadedSet, symbols: npt.NDArray[np.int32]) -> None:
    """Refuse symbols outside the input range the set's ``wai-ops/1`` program declares."""
    program = files.facts.program("wai-ops")
    if program is None or program.file is None:
        return
    try:
        declared = json.loads(files.read(program.file))["input"]["range"]
        lo, hi = int(declared[0]), int(declared[1])
    except (ValueError, KeyError, TypeError, IndexError):
        return  # a program that does not state it: its decode says what is wrong
    low, high = int(symbols.min()), int(symbols.max())
    if low < lo or high > hi:
        outside = int(np.count_nonzero((symbols < lo) | (symbols > hi)))
        raise SymbolsOutOfRange(
            f"the quantized latent holds {outside} symbols outside [{lo}, {hi}] (from {low} to "
            f"{high}), the input range set {files.name}'s wai-ops program declares: its decode "
            "would refuse them; encode for the float set instead",
        )
