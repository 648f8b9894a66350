"""Rewrite strided transposed convolutions as sub-pixel regular convolutions, in memory.

A ``ConvTranspose`` whose output is exactly ``s`` times its input computes each of its ``s×s``
output phases as a regular correlation with a subset of its taps: each phase becomes its own
``Conv`` (``"split"``, the default) or all phases one ``Conv`` followed by an interleave. The new
weights are the old ones rearranged, so the rewrite is exact up to the order of summation, and
ONNX Runtime runs it much closer to the GEMM roof (docs/onnx-path.md). Needs ``onnx``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: onnx itself loads when a session build rewrites
    import onnx
    from onnx import TensorProto


@dataclass(frozen=True)
class Phases:
    """One axis of a sub-pixel split: the regular kernel's length, its padding, and for each
    phase ``r`` and window position ``j`` the transposed kernel's tap (or -1: no tap)."""

    size: int
    pad_begin: int
    pad_end: int
    taps: tuple[tuple[int, ...], ...]  # taps[r][j]


def phases(kernel: int, stride: int, pad_begin: int, pad_end: int, output_padding: int) -> Phases:
    """The sub-pixel split of one axis, or ``ValueError`` when none is exact.

    ConvTranspose writes input ``i`` through tap ``t`` to output ``o = s·i - pad_begin + t``.
    Output ``o = s·m + r`` therefore reads inputs ``i = m - d`` through taps
    ``t = s·d + r + pad_begin``, for the ``d`` that put ``t`` inside the kernel.
    """
    if kernel + output_padding - pad_begin - pad_end != stride:
        raise ValueError("the output is not exactly stride × the input")
    if not 0 <= output_padding < stride:
        raise ValueError("output_padding must be in [0, stride)")
    ds = [
        d
        for r in range(stride)
        for d in range(-kernel - stride, kernel + stride)
        if 0 <= stride * d + r + pad_begin < kernel
    ]
    d_max, d_min = max(ds), min(ds)
    if d_max < 0 or d_min > 0:
        raise ValueError("the split would need negative padding")
    size = d_max - d_min + 1
    taps = []
    for r in range(stride):
        row = []
        for j in range(size):
            t = stride * (d_max - j) + r + pad_begin
            row.append(t if 0 <= t < kernel else -1)
        taps.append(tuple(row))
    return Phases(size, d_max, -d_min, tuple(taps))


def phase_split_weights(
    weight: np.ndarray, bias: np.ndarray | None, py: Phases, px: Phases, mode: str = "DCR"
) -> tuple[np.ndarray, np.ndarray | None]:
    """ConvTranspose weights ``[Cin, Cout, kh, kw]`` as the regular Conv's
    ``[s·s·Cout, Cin, KH, KW]``, channels ordered ``(phase_y, phase_x, Cout)`` for
    ``DepthToSpace`` mode ``DCR``; the bias repeats per phase."""
    cin, cout = weight.shape[0], weight.shape[1]
    sy, sx = len(py.taps), len(px.taps)
    out = np.zeros((sy, sx, cout, cin, py.size, px.size), dtype=weight.dtype)
    w = weight.transpose(1, 0, 2, 3)  # [Cout, Cin, kh, kw]
    for ry in range(sy):
        for rx in range(sx):
            for jy, ty in enumerate(py.taps[ry]):
                for jx, tx in enumerate(px.taps[rx]):
                    if ty >= 0 and tx >= 0:
                        out[ry, rx, :, :, jy, jx] = w[:, :, ty, tx]
    if mode == "CRD":  # channels ordered (Cout, phase_y, phase_x)
        out = out.transpose(2, 0, 1, 3, 4, 5)
        new_bias = None if bias is None else np.repeat(bias, sy * sx)
    else:
        new_bias = None if bias is None else np.tile(bias, sy * sx)
    return np.ascontiguousarray(out).reshape(sy * sx * cout, cin, py.size, px.size), new_bias


def initializer_array(tensor: TensorProto, files: Mapping[str, bytes]) -> np.ndarray:
    """An initializer's values, reading external data from ``files`` (name → bytes), never
    from disk."""
    from onnx import (  # lazy: onnx loads in ~0.7 s; only a session build rewrites
        TensorProto,
        helper,
        numpy_helper,
    )

    if tensor.data_location != TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    info = {e.key: e.value for e in tensor.external_data}
    buf = files[info["location"]]
    offset = int(info.get("offset", "0"))
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    count = int(np.prod(tensor.dims, dtype=np.int64))
    length = int(info.get("length", str(count * dtype.itemsize)))
    if length != count * dtype.itemsize or offset + length > len(buf):
        raise ValueError(f"initializer {tensor.name!r}: external data out of range")
    raw = np.frombuffer(buf, dtype=dtype.newbyteorder("<"), count=count, offset=offset)
    return raw.astype(dtype).reshape(tuple(tensor.dims))


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    from onnx import helper  # lazy: onnx loads in ~0.7 s; only a session build rewrites

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _split_of(node: onnx.NodeProto, weight_shape: tuple[int, ...]) -> tuple[Phases, Phases] | None:
    """The exact split of a 2-D, ungrouped, undilated ConvTranspose, or ``None``."""
    a = _attrs(node)
    if len(weight_shape) != 4 or int(a.get("group", 1)) != 1:
        return None
    if "output_shape" in a or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    kernel = [int(k) for k in a.get("kernel_shape", weight_shape[2:])]
    strides = [int(s) for s in a.get("strides", [1, 1])]
    pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
    out_pad = [int(p) for p in a.get("output_padding", [0, 0])]
    dil = [int(d) for d in a.get("dilations", [1, 1])]
    if kernel != list(weight_shape[2:]) or dil != [1, 1] or strides[0] != strides[1]:
        return None
    if strides[0] < 2:
        return None
    try:
        py = phases(kernel[0], strides[0], pads[0], pads[2], out_pad[0])
        px = phases(kernel[1], strides[1], pads[1], pads[3], out_pad[1])
    except ValueError:
        return None
    return py, px


#: How the phases are computed and interleaved into the picture (see :func:`rewrite_model`).
GLUES = ("split", "shuffle", "depth-to-space")

#: ``"split"`` gives each phase its own ``Conv`` only where ``Cout`` is at least this: ONNX
#: Runtime's NCHWc convolution pads output channels to its block (16 with AVX-512), so a
#: layer with few output channels (bmshj2018's last, 3) is cheaper as one merged ``Conv``.
SPLIT_MIN_CHANNELS = 16


def phase_window(p: Phases, r: int) -> tuple[int, int] | None:
    """The window positions ``[j0, j1]`` that hold phase ``r``'s taps, or ``None`` when its
    own ``Conv`` would need negative padding (or it has no tap)."""
    js = [j for j, t in enumerate(p.taps[r]) if t >= 0]
    if not js or js != list(range(js[0], js[-1] + 1)):
        return None
    j0, j1 = js[0], js[-1]
    if p.pad_begin - j0 < 0 or p.pad_end - (p.size - 1 - j1) < 0:
        return None
    return j0, j1


def phase_weights(
    weight: np.ndarray, py: Phases, px: Phases, ry: int, rx: int
) -> tuple[np.ndarray, list[int]] | None:
    """Phase ``(ry, rx)`` alone: its own ``Conv`` weights ``[Cout, Cin, kh_r, kw_r]`` (only
    the taps it uses, no zeros) and its ONNX pads ``(y_begin, x_begin, y_end, x_end)``; ``None``
    when :func:`phase_window` has none."""
    wy, wx = phase_window(py, ry), phase_window(px, rx)
    if wy is None or wx is None:
        return None
    (y0, y1), (x0, x1) = wy, wx
    w = weight.transpose(1, 0, 2, 3)  # [Cout, Cin, kh, kw]
    out = np.empty((w.shape[0], w.shape[1], y1 - y0 + 1, x1 - x0 + 1), dtype=weight.dtype)
    for jy in range(y0, y1 + 1):
        for jx in range(x0, x1 + 1):
            out[:, :, jy - y0, jx - x0] = w[:, :, py.taps[ry][jy], px.taps[rx][jx]]
    pads = [py.pad_begin - y0, px.pad_begin - x0]
    pads += [py.pad_end - (py.size - 1 - y1), px.pad_end - (px.size - 1 - x1)]
    return out, pads


def shuffle_weights(channels: int, s: int) -> np.ndarray:
    """The weights of a grouped ``ConvTranspose`` (kernel = stride = ``s``, ``channels``
    groups) that moves input channel ``c·s² + by·s + bx`` to pixel ``(by, bx)`` of each
    ``s×s`` block of output channel ``c``: ``DepthToSpace`` in mode ``CRD``."""
    w = np.zeros((channels, s, s, 1, s, s), dtype=np.float32)
    for by in range(s):
        for bx in range(s):
            w[:, by, bx, 0, by, bx] = 1.0
    return w.reshape(channels * s * s, 1, s, s)


def rewrite_model(model: onnx.ModelProto, files: Mapping[str, bytes], glue: str = "split") -> int:
    """Rewrite, in place, every ConvTranspose of ``model`` that has an exact sub-pixel split
    and constant weights; return how many were rewritten. The replaced weights are dropped
    where nothing else reads them; the new ones are stored inline.

    ``glue`` (docs/onnx-path.md): ``"depth-to-space"``, one ``Conv`` and ``DepthToSpace``;
    ``"shuffle"``, one ``Conv`` and a 0/1 grouped ``ConvTranspose`` (:func:`shuffle_weights`,
    exact for finite values, about 2.5× faster than ``DepthToSpace``); ``"split"`` (the
    default), one ``Conv`` per phase with only its taps (:func:`phase_weights`) joined in CRD
    order, then the same shuffle, or the ``"shuffle"`` form where ``Cout`` is under
    :data:`SPLIT_MIN_CHANNELS` or a phase has no window of its own.
    """
    if glue not in GLUES:
        raise ValueError(f"glue is one of {GLUES}, not {glue!r}")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 11:  # DepthToSpace's ``mode`` (DCR) needs opset 11
        return 0
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    added: list[TensorProto] = []
    replaced: set[str] = set()
    count = 0
    for index, node in enumerate(graph.node):
        found = _constant_split(node, inits)
        if found is None:
            nodes.append(node)
            continue
        weight_name, bias_name, (py, px) = found
        weight = initializer_array(inits[weight_name], files)
        bias = initializer_array(inits[bias_name], files) if bias_name else None
        stem = f"{node.name or f'ConvTranspose_{index}'}.subpixel"
        replaced.update(n for n in (weight_name, bias_name) if n)
        split_nodes = None
        if glue == "split" and weight.shape[1] >= SPLIT_MIN_CHANNELS:
            split_nodes = _split_phases(node, stem, weight, bias, py, px, added)
        if split_nodes is None:
            split_nodes = _merged_phases(node, stem, weight, bias, (py, px), glue, added)
        nodes += split_nodes
        count += 1
    if count == 0:
        return 0
    still_read = {name for n in nodes for name in n.input}
    kept = [t for t in graph.initializer if t.name not in replaced or t.name in still_read]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    return count


def _constant_split(
    node: onnx.NodeProto, inits: Mapping[str, TensorProto]
) -> tuple[str, str, tuple[Phases, Phases]] | None:
    """A ConvTranspose whose weights (and bias) are initializers and that has an exact
    sub-pixel split: its weight's and bias's names (``""``: none) and the split; else ``None``."""
    if node.op_type != "ConvTranspose" or node.domain not in ("", "ai.onnx"):
        return None
    weight_name = node.input[1] if len(node.input) > 1 else ""
    bias_name = node.input[2] if len(node.input) > 2 else ""
    if weight_name not in inits or (bias_name and bias_name not in inits):
        return None
    split = _split_of(node, tuple(int(d) for d in inits[weight_name].dims))
    return None if split is None else (weight_name, bias_name, split)


def _merged_phases(
    node: onnx.NodeProto,
    stem: str,
    weight: np.ndarray,
    bias: np.ndarray | None,
    split: tuple[Phases, Phases],
    glue: str,
    added: list[TensorProto],
) -> list[onnx.NodeProto]:
    """The ``"depth-to-space"`` or ``"shuffle"`` form of one ConvTranspose (see
    :func:`rewrite_model`): one ``Conv`` for all phases, then the glue."""
    from onnx import (  # lazy: onnx loads in ~0.7 s; only a session build rewrites
        helper,
        numpy_helper,
    )

    py, px = split
    mode = "DCR" if glue == "depth-to-space" else "CRD"
    new_w, new_b = phase_split_weights(weight, bias, py, px, mode)
    added.append(numpy_helper.from_array(np.ascontiguousarray(new_w), f"{stem}.w"))
    conv_inputs = [node.input[0], f"{stem}.w"]
    if new_b is not None:
        added.append(numpy_helper.from_array(np.ascontiguousarray(new_b), f"{stem}.b"))
        conv_inputs.append(f"{stem}.b")
    conv = helper.make_node(
        "Conv",
        conv_inputs,
        [f"{stem}.phases"],
        name=f"{stem}.conv",
        kernel_shape=[py.size, px.size],
        pads=[py.pad_begin, px.pad_begin, py.pad_end, px.pad_end],
        strides=[1, 1],
    )
    s = len(py.taps)
    if glue != "depth-to-space":
        return [conv, _shuffle(node, stem, new_w.shape[0] // (s * s), s, added)]
    d2s = helper.make_node(
        "DepthToSpace",
        [f"{stem}.phases"],
        [node.output[0]],
        name=f"{stem}.d2s",
        blocksize=s,
        mode=mode,
    )
    return [conv, d2s]


def _shuffle(
    node: onnx.NodeProto, stem: str, cout: int, s: int, added: list[TensorProto]
) -> onnx.NodeProto:
    """The grouped 0/1 ``ConvTranspose`` that interleaves ``{stem}.phases`` (CRD order) into
    the ConvTranspose's output."""
    from onnx import (  # lazy: onnx loads in ~0.7 s; only a session build rewrites
        helper,
        numpy_helper,
    )

    added.append(numpy_helper.from_array(shuffle_weights(cout, s), f"{stem}.shuffle"))
    return helper.make_node(
        "ConvTranspose",
        [f"{stem}.phases", f"{stem}.shuffle"],
        [node.output[0]],
        name=f"{stem}.shuffle",
        group=cout,
        kernel_shape=[s, s],
        strides=[s, s],
    )


def _split_phases(
    node: onnx.NodeProto,
    stem: str,
    weight: np.ndarray,
    bias: np.ndarray | None,
    py: Phases,
    px: Phases,
    added: list[TensorProto],
) -> list[onnx.NodeProto] | None:
    """The ``"split"`` form of one ConvTranspose (see :func:`rewrite_model`), or ``None``
    when a phase has no window of its own (nothing is added then)."""
    from onnx import (  # lazy: onnx loads in ~0.7 s; only a session build rewrites
        helper,
        numpy_helper,
    )

    s = len(py.taps)
    per_phase = [phase_weights(weight, py, px, ry, rx) for ry in range(s) for rx in range(s)]
    if any(p is None for p in per_phase):
        return None
    cout = weight.shape[1]
    new: list[TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    flat = f"{stem}.flat_shape"
    new.append(numpy_helper.from_array(np.array([0, cout, 1, -1], np.int64), flat))
    if bias is not None:
        new.append(numpy_helper.from_array(np.ascontiguousarray(bias), f"{stem}.b"))
    flats = []
    for index, phase in enumerate(per_phase):
        assert phase is not None
        w, pads = phase
        name = f"{stem}.phase{index}"
        new.append(numpy_helper.from_array(np.ascontiguousarray(w), f"{name}.w"))
        inputs = [node.input[0], f"{name}.w"] + ([f"{stem}.b"] if bias is not None else [])
        nodes += [
            helper.make_node(
                "Conv",
                inputs,
                [f"{name}.out"],
                name=f"{name}.conv",
                kernel_shape=list(w.shape[2:]),
                pads=pads,
                strides=[1, 1],
            ),
            helper.make_node(
                "Reshape", [f"{name}.out", flat], [f"{name}.flat"], name=f"{name}.flat"
            ),
        ]
        flats.append(f"{name}.flat")
    nodes += _join_phases(stem, flats, s, new)
    added += new
    nodes.append(_shuffle(node, stem, cout, s, added))
    return nodes


def _join_phases(
    stem: str, flats: list[str], s: int, added: list[TensorProto]
) -> list[onnx.NodeProto]:
    """The phases' flat outputs joined in CRD order, ``{stem}.phases`` (``[N, s²·Cout, H, W]``:
    the first phase's shape with ``s²`` times its channels)."""
    from onnx import (  # lazy: onnx loads in ~0.7 s; only a session build rewrites
        helper,
        numpy_helper,
    )

    added.append(numpy_helper.from_array(np.array([1, s * s, 1, 1], np.int64), f"{stem}.scale"))
    return [
        helper.make_node("Concat", flats, [f"{stem}.joined"], name=f"{stem}.join", axis=2),
        helper.make_node(
            "Shape", [f"{stem}.phase0.out"], [f"{stem}.shape0"], name=f"{stem}.shape0"
        ),
        helper.make_node(
            "Mul", [f"{stem}.shape0", f"{stem}.scale"], [f"{stem}.shape"], name=f"{stem}.shape"
        ),
        helper.make_node(
            "Reshape",
            [f"{stem}.joined", f"{stem}.shape"],
            [f"{stem}.phases"],
            name=f"{stem}.phases",
        ),
    ]
