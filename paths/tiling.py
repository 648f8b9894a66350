"""Tiled synthesis: the latent cut into tiles with a halo no smaller than the network's
receptive field, so a decode holds one tile's activations and the picture, whatever its size
(docs/onnx-path.md, "Tiles").

The receptive field is derived from the program itself (a list of :class:`Layer`) by walking
back from the picture rows of one latent position to the latent rows they read (:func:`reach`;
bmshj2018: a halo of one latent row before a tile and two after). A tile computes its interior
from the same numbers as the whole decode: the integer path is the same bit for bit, the float
path up to the backend's summation order. :func:`reach` answers ``None`` for a program it
cannot tile (a layer neither stride 1 nor a transposed convolution), which then runs whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MiB = 1024 * 1024
#: One tile's activations at most, by default (the ``tile_bytes`` setting). The budget of a
#: decode is its job's (:attr:`paths.job.SynthesisJob.tile_bytes`, the decoder's setting): no
#: process-wide budget.
DEFAULT_TILE_BYTES = 256 * MiB


@dataclass(frozen=True)
class Layer:
    """One node of a synthesis program, as tiling sees it: the tensor it writes, the tensors
    it reads that have the latent's spatial layout (weights left out), and how an output
    position relates to input positions on each axis. ``kernel`` 1, ``stride`` 1, ``padding``
    0: pointwise. A convolution's output ``o`` reads inputs ``o·stride − padding + k`` for
    ``k < kernel``; a transposed convolution's output ``o`` receives input ``i`` when
    ``o = i·stride − padding + k``."""

    output: str
    inputs: tuple[str, ...]
    kernel: int = 1
    stride: int = 1
    padding: int = 0
    padding_end: int = 0
    output_padding: int = 0
    transposed: bool = False

    def size(self, n: int) -> int:
        """The output size on one axis for an input of ``n`` positions."""
        if self.transposed:
            return (
                (n - 1) * self.stride
                - self.padding
                - self.padding_end
                + self.kernel
                + (self.output_padding)
            )
        return (n + self.padding + self.padding_end - self.kernel) // self.stride + 1

    def reads(self, lo: int, hi: int) -> tuple[int, int]:
        """The input positions output positions ``lo … hi`` read (inclusive)."""
        s, p, k = self.stride, self.padding, self.kernel
        if self.transposed:
            return -((-(lo + p - k + 1)) // s), (hi + p) // s
        return lo * s - p, hi * s - p + k - 1


@dataclass(frozen=True)
class Reach:
    """What tiling needs of a program: picture positions per latent position (``stride``),
    and the latent positions the picture rows of one latent position read before it
    (``before``) and after it (``after``): the halo."""

    stride: int
    before: int
    after: int

    @property
    def field(self) -> int:
        """The receptive field in latent positions (per axis)."""
        return self.before + 1 + self.after


def reach(layers: Sequence[Layer], source: str, sink: str) -> Reach | None:
    """The :class:`Reach` of the program ``layers`` (in the order they run) from the latent
    tensor ``source`` to the picture ``sink``; ``None`` when it cannot be tiled (a strided
    convolution, a picture that is not ``stride × latent``, a sink not reached)."""
    if any(layer.stride != 1 and not layer.transposed for layer in layers):
        return None
    sizes: dict[str, tuple[int, int]] = {source: (64, 65)}
    for layer in layers:
        known = [sizes[i] for i in layer.inputs if i in sizes]
        if not known:
            continue  # reads no spatial tensor: a constant
        if any(k != known[0] for k in known):
            return None
        a, b = known[0]
        sizes[layer.output] = (layer.size(a), layer.size(b))
    if sink not in sizes:
        return None
    out64, out65 = sizes[sink]
    stride = out65 - out64
    if stride < 1 or out64 != 64 * stride:
        return None
    a0 = 1000  # any latent row far from the edges: the relation is periodic in it
    wanted: dict[str, tuple[int, int]] = {sink: (stride * a0, stride * a0 + stride - 1)}
    for layer in reversed(layers):
        span = wanted.get(layer.output)
        if span is None:
            continue
        lo, hi = layer.reads(*span)
        for name in layer.inputs:
            old = wanted.get(name)
            wanted[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    if source not in wanted:
        return None
    lo, hi = wanted[source]
    return Reach(stride, max(0, a0 - lo), max(0, hi - a0))


@dataclass(frozen=True)
class Tile:
    """One tile: the latent window it runs (``y0:y1``, ``x0:x1``) and the latent positions
    whose picture it writes (``iy0:iy1``, ``ix0:ix1``, inside the window)."""

    y0: int
    y1: int
    x0: int
    x1: int
    iy0: int
    iy1: int
    ix0: int
    ix1: int


def _edges(n: int, step: int) -> list[tuple[int, int]]:
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def plan(height: int, width: int, r: Reach, budget: int, bytes_per_pixel: float) -> list[Tile]:
    """The tiles of a ``height × width`` latent whose windows (interior and halo) hold at most
    ``budget`` bytes of activations at ``bytes_per_pixel`` per picture pixel; one tile, the
    whole latent, when it fits; at least one latent position of interior per tile."""
    positions = max(1, int(budget // max(bytes_per_pixel * r.stride * r.stride, 1e-9)))
    if height * width <= positions:
        return [Tile(0, height, 0, width, 0, height, 0, width)]
    halo = r.before + r.after
    side = max(1, int(positions**0.5) - halo)
    th = min(height, side)
    # the rows the window has, then as many columns as the budget gives (a 1×N latent gets
    # long tiles)
    rows = th + min(halo, height - th)
    tw = min(width, max(1, positions // max(rows, 1) - halo))
    tiles = []
    for iy0, iy1 in _edges(height, th):
        for ix0, ix1 in _edges(width, tw):
            y0, y1 = max(0, iy0 - r.before), min(height, iy1 + r.after)
            x0, x1 = max(0, ix0 - r.before), min(width, ix1 + r.after)
            tiles.append(Tile(y0, y1, x0, x1, iy0, iy1, ix0, ix1))
    return tiles


def run_tiled(
    x: np.ndarray,
    r: Reach,
    tiles: Sequence[Tile],
    run: Callable[[np.ndarray, bool], np.ndarray],
    convert: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """The picture of ``x`` ([1, C, h, w]) computed tile by tile: ``run(window, last)`` gives
    the window's picture ([1, C', s·wh, s·ww]; ``last``: the decode's final tile), whose
    interior is copied (through ``convert``, elementwise, when given) into one float32
    picture ``[1, C', s·h, s·w]``."""
    s = r.stride
    h, w = int(x.shape[2]), int(x.shape[3])
    out: np.ndarray | None = None
    for n, t in enumerate(tiles):
        piece = run(np.ascontiguousarray(x[:, :, t.y0 : t.y1, t.x0 : t.x1]), n == len(tiles) - 1)
        if out is None:
            out = np.empty((1, int(piece.shape[1]), s * h, s * w), dtype=np.float32)
        oy, ox = s * (t.iy0 - t.y0), s * (t.ix0 - t.x0)
        inner = piece[:, :, oy : oy + s * (t.iy1 - t.iy0), ox : ox + s * (t.ix1 - t.ix0)]
        out[:, :, s * t.iy0 : s * t.iy1, s * t.ix0 : s * t.ix1] = (
            inner if convert is None else convert(inner)
        )
        del piece, inner
    assert out is not None
    return out


#: ONNX operations that read and write the same spatial positions (with broadcasting).
POINTWISE_ONNX = frozenset(
    {
        "Abs",
        "Add",
        "Cast",
        "Clip",
        "Div",
        "Exp",
        "Floor",
        "Identity",
        "Log",
        "Max",
        "Min",
        "Mul",
        "Neg",
        "Pow",
        "Reciprocal",
        "Relu",
        "Round",
        "Sigmoid",
        "Sqrt",
        "Sub",
        "Tanh",
    }
)


def onnx_layers(graph: Any) -> list[Layer] | None:
    """The layers of an ONNX graph (``onnx.GraphProto``), or ``None`` when an operation is
    none tiling knows (:data:`POINTWISE_ONNX`, ``Conv``, ``ConvTranspose``, ``Constant``)."""
    from onnx import helper

    layers = []
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        inputs = tuple(i for i in node.input if i)
        if node.op_type == "Constant":
            continue
        if node.op_type in POINTWISE_ONNX:
            layers.append(Layer(node.output[0], inputs))
            continue
        if node.op_type not in ("Conv", "ConvTranspose"):
            return None
        kernel = list(attrs.get("kernel_shape", []))
        strides = list(attrs.get("strides", [1, 1]))
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        dilations = list(attrs.get("dilations", [1, 1]))
        out_pad = list(attrs.get("output_padding", [0, 0]))
        square = (
            len(kernel) == 2
            and kernel[0] == kernel[1]
            and strides[0] == strides[1]
            and pads[0] == pads[1]
            and pads[2] == pads[3]
            and out_pad[0] == out_pad[1]
            and dilations == [1, 1]
            and attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")
            and "output_shape" not in attrs
        )
        if not square:
            return None
        layers.append(
            Layer(
                node.output[0],
                inputs[:1],
                kernel=int(kernel[0]),
                stride=int(strides[0]),
                padding=int(pads[0]),
                padding_end=int(pads[2]),
                output_padding=int(out_pad[0]),
                transposed=node.op_type == "ConvTranspose",
            )
        )
    return layers


def waiops_layers(operations: Sequence[Any]) -> list[Layer]:
    """The layers of a ``wai-ops/1`` program's operations (docs/wai-ops.md): ``conv2d``
    (stride 1, ``padding`` both sides), ``conv_transpose2d``, and pointwise steps."""
    layers = []
    for op in operations:
        a = op.attrs
        if op.op in ("conv2d", "conv_transpose2d"):
            transposed = op.op == "conv_transpose2d"
            layers.append(
                Layer(
                    op.output,
                    tuple(op.inputs[:1]),
                    kernel=int(a["kernel"]),
                    stride=int(a.get("stride", 1)),
                    padding=int(a["padding"]),
                    padding_end=int(a["padding"]),
                    output_padding=int(a.get("output_padding", 0)) if transposed else 0,
                    transposed=transposed,
                )
            )
        else:
            layers.append(Layer(op.output, tuple(op.inputs)))
    return layers
