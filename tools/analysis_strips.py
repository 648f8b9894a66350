"""The encoders' analysis transforms in strips of latent rows (docs/encode.md, "Memory"): each
strip of the latent is computed from the picture rows it depends on, layer by layer, so no
activation is held whole; the rows a strip needs beyond its own (its halo) are computed again
by its neighbour. Each output row is computed from the same input rows by the same operation
as on the whole tensor (a piece keeps the picture's zero padding at its true edges only), so
the strips change no bit: tests/tools/test_analysis_strips.py holds them to the whole."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

#: The most bytes of the largest activation a strip holds (its first layer's output, at 8
#: bytes a value): with it an encode's memory is a constant, whatever the picture's size.
ACTIVATION_BYTES = 128 << 20


class RowLayer(Protocol):
    """A layer along rows: ``geometry`` (kernel, stride, padding) and ``rows(x, lo, height, a,
    b)``, its output rows ``a:b`` from ``x``, the input's rows from ``lo`` (of ``height``)."""

    geometry: tuple[int, int, int]

    def rows(self, x: Any, lo: int, height: int, a: int, b: int) -> Any: ...


def heights(layers: Sequence[RowLayer], height: int) -> list[int]:
    """The rows of the input and of each layer's output."""
    out = [height]
    for layer in layers:
        k, s, p = layer.geometry
        out.append((out[-1] + 2 * p - k) // s + 1)
    return out


def latent_rows(channels: int, width: int, stride: int) -> int:
    """Latent rows per strip: a strip's first activation (``channels`` at ``width``, ``stride``
    of its rows to a latent row) within :data:`ACTIVATION_BYTES`."""
    return max(1, ACTIVATION_BYTES // (8 * channels * max(width, 1) * stride))


def run(
    layers: Sequence[RowLayer],
    source: Callable[[int, int], Any],
    height: int,
    rows: int,
    sink: Callable[[int, int, Any], None],
    on_strip: Callable[[int, int], None] | None = None,
) -> None:
    """The layers on ``source(lo, hi)`` (the input's rows ``lo:hi`` of ``height``), ``rows``
    output rows at a time, each strip given to ``sink(a, b, rows a:b)``."""
    tall = heights(layers, height)
    total = -(-tall[-1] // rows)
    for done, a in enumerate(range(0, tall[-1], rows), start=1):
        spans = [(a, min(tall[-1], a + rows))]
        for layer, h in zip(reversed(layers), reversed(tall[:-1]), strict=True):
            k, s, p = layer.geometry
            lo, hi = spans[0]
            spans.insert(0, (max(0, lo * s - p), min(h, (hi - 1) * s - p + k)))
        x = source(*spans[0])
        for layer, h, (lo, _), (a_, b_) in zip(layers, tall, spans, spans[1:], strict=False):
            x = layer.rows(x, lo, h, a_, b_)
        sink(*spans[-1], x)
        if on_strip is not None:
            on_strip(done, total)


class TorchLayer:
    """A torch module along rows (a ``Conv2d``, or a GDN: pointwise), run with its own padding
    on a piece whose first row is a multiple of its stride, the rows the piece's own edges
    reach dropped; ``peak``: the largest ``|value|`` of its outputs so far. With ``alone``, a
    GDN runs on one thread: oneDNN's 1×1 convolution on several may split its sum over the
    channels by the piece's size, where on one it sums them in one order whatever the size
    (the order a whole picture's took on several threads here, at the sizes that need strips
    we tried; tests/tools/test_encode.py pins the bundled sample's bytes in strips)."""

    def __init__(self, module: Any, alone: bool = False) -> None:
        self.module = module
        k = getattr(module, "kernel_size", (1,))[0]
        self.geometry = (k, getattr(module, "stride", (1,))[0], getattr(module, "padding", (0,))[0])
        self.alone = alone and self.geometry == (1, 1, 0)
        self.peak = 0.0

    def rows(self, x: Any, lo: int, height: int, a: int, b: int) -> Any:
        s = self.geometry[1]
        if lo % s:
            raise ValueError(f"a piece from row {lo} is off the stride {s}")
        if self.alone:
            with _ONE:
                import torch

                threads = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    out = self.module(x)
                finally:
                    torch.set_num_threads(threads)
        else:
            out = self.module(x)
        out = out[:, :, a - lo // s : b - lo // s].contiguous()
        if out.numel():
            self.peak = max(self.peak, float(out.abs().max()))
        return out


_ONE = threading.Lock()
