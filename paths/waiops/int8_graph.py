"""The int8 graph engine of ``wai-ops/1``: the whole program as one ONNX Runtime graph whose
convolutions run on ``ConvInteger`` (the CPU's int8 units), activations in balanced 7-bit planes
and weights in base-256 digits (docs/wai-ops.md, "The int8 graph engine, and why it is exact on
every CPU"; the integer arithmetic in :mod:`paths.waiops.int8_digits`).

Every term and partial sum of the recombination is proven inside int32 from the weights and the
bound rule, or the engine refuses the program (:class:`NotGraphExact`).
``tests/paths/test_waiops_int8_graph.py`` holds it to the int64 reference bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np

from wai_dispatch.paths.onnx import arena_shrink_options, shared_session_options
from wai_dispatch.paths.onnx_rewrite import (
    SPLIT_MIN_CHANNELS,
    phase_split_weights,
    phase_weights,
    phases,
    shuffle_weights,
)
from wai_dispatch.paths.waiops.int8_digits import plane_ranges, recombination_bound, weight_digits
from wai_dispatch.paths.waiops.onnx_engine import check_sqrt, requantize_readers
from wai_dispatch.paths.waiops.program import INT32_MAX, Operation, Program
from wai_dispatch.paths.waiops.run import check_input
from wai_dispatch.setfacts.limits import Limits

OPSET = 17
#: Bits of one balanced plane: base 128, every plane in [−64, 64], so a pair of u8 × s8
#: products is at most ``2 · 255 · 64 = 32,640`` in magnitude (docs/wai-ops.md).
PLANE_BITS = 7


def set_plane_bits(bits: int) -> None:
    """Engines built after this call use ``bits``-bit planes: only for showing what 8-bit
    planes (±128) do on a saturating kernel (``tools/int8_check.py``, the tests)."""
    global PLANE_BITS
    if not 2 <= bits <= 8:
        raise ValueError("plane bits are 2…8")
    PLANE_BITS = bits


class NotGraphExact(ValueError):
    """A program the int8 graph engine does not take (an intermediate it could not prove
    inside int32, or an inverse GDN outside a float32-exact program)."""


class _G:
    """An ONNX graph under construction."""

    def __init__(self, ftype: Any, bits: int) -> None:
        self.bits = bits
        self.products: dict[str, int] = {}  # conv → its int8 products per input position
        self.floats: set[str] = set()  # accumulators already in the float type
        self.scaled: set[str] = set()  # accumulators already times their requantize's 2^-s
        self.woven: dict[str, _Value] = {}  # a phased value → its woven one
        self.halves: set[str] = set()  # phased values already split in their two halves
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.ftype = ftype  # np.float32 or np.float64: the pointwise values' type
        self.readers: dict[str, list[Operation]] = {}  # value → the operations reading it
        self._n = 0

    def const(self, value: np.ndarray | float, dtype: Any = None) -> str:
        from onnx import numpy_helper

        self._n += 1
        name = f"c{self._n}"
        arr = np.ascontiguousarray(np.asarray(value, dtype=dtype or self.ftype))
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        self._n += 1
        out = f"v{self._n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"n{self._n}_{op}", **attrs))
        return out

    def per_channel(self, v: np.ndarray) -> str:
        return self.const(np.asarray(v).reshape(1, -1, 1, 1))


class _Value:
    """A value of the graph: its tensor name, and its phases: 1, an ordinary [1, C, H, W]
    value; 2, a stride-2 transposed convolution's output with its rows woven and its columns
    not, [1, C, 2H, 2W] with ``(2h + ry, rx·W + w)`` holding output ``(2h + ry, 2w + rx)``:
    the four phases side by side in one tensor, so that the pointwise glue and the inverse
    GDN's 1×1 convolution run on it as on the picture, and the columns are woven once, on the
    int8 plane the next convolution reads (:func:`_weave`); 4, a merged phase convolution's
    output, [1, 4·C, H, W] with channel ``c·4 + ry·2 + rx`` holding phase ``(ry, rx)`` of
    channel ``c`` (ONNX's CRD)."""

    def __init__(self, name: str, phases: int = 1, channels: int = 0, plane: bool = False) -> None:
        self.name = name
        self.phases = phases
        self.channels = channels  # C, where phased
        self.plane = plane  # already the one int8 plane a convolution reads (not float)

    def like(self, name: str) -> _Value:
        """Another value of the same layout (a pointwise operation's output)."""
        return _Value(name, self.phases, self.channels)


def _per_channel(g: _G, v: np.ndarray, x: _Value) -> str:
    return g.per_channel(np.repeat(np.asarray(v, dtype=np.float64), 4 if x.phases == 4 else 1))


def _weave(g: _G, x: _Value) -> _Value:
    """A phased value woven into the picture, [1, C, 2H, 2W]. Columns side by side (phases
    2): split in the even and odd halves, each a column of its own (``Unsqueeze``), put side by
    side again (``Concat``): a copy, exact in any type (used on int8 planes). CRD channels
    (phases 4): in float32 the 0/1 grouped ``ConvTranspose`` of the float path (each output is
    ``1 · x + 0 · y + …``, exactly ``x``), in float64 ``DepthToSpace``."""

    if x.phases == 1:
        return x
    if x.name in g.woven:
        return g.woven[x.name]
    if x.phases == 2:
        axis = g.const(np.array([4]), np.int64)
        halves = _column_halves(g, x.name)
        cols = g.node("Concat", [g.node("Unsqueeze", [h, axis]) for h in halves], axis=4)
        flat = g.node("Reshape", [cols, g.const(np.array([0, 0, 0, -1]), np.int64)])
        g.woven[x.name] = _Value(flat, plane=x.plane)
        return g.woven[x.name]
    if g.ftype is not np.float32:
        return _Value(g.node("DepthToSpace", [x.name], blocksize=2, mode="CRD"))
    c = x.channels
    w = g.const(shuffle_weights(c, 2))
    y = g.node("ConvTranspose", [x.name, w], group=c, kernel_shape=[2, 2], strides=[2, 2])
    return _Value(y)


def _column_halves(g: _G, x: str) -> tuple[str, str]:
    """The even and the odd columns of a value whose columns lie side by side (phases 2):
    ``Split`` in two along the width, once per value."""
    from onnx import helper

    halves = (f"{x}_rx0", f"{x}_rx1")
    if x not in g.halves:
        g.nodes.append(helper.make_node("Split", [x], list(halves), name=f"{x}_split", axis=3))
        g.halves.add(x)
    return halves


def _planes(g: _G, x: str, ranges: list[tuple[int, int]]) -> list[str]:
    """``x`` (exact integers, float) as its balanced planes, each int8 [1, C, H, W]: for
    7 bits ``h = ⌊(x + 64) / 128⌋``, ``l = x − 128 h``, then ``h`` again while it is wide
    (every step exact: integers, a power-of-two scaling, ``Floor``)."""
    from onnx import TensorProto

    base = 1 << g.bits
    out = []
    rest = x
    for _ in ranges[:-1]:
        t = g.node("Add", [rest, g.const(base // 2)])
        h = g.node("Floor", [g.node("Mul", [t, g.const(1 / base)])])
        out.append(g.node("Sub", [rest, g.node("Mul", [h, g.const(base)])]))
        rest = h
    out.append(rest)
    return [g.node("Cast", [p], to=TensorProto.INT8) for p in out]


def _conv_integer(
    g: _G,
    planes: list[str],
    w: np.ndarray,
    pads: list[int],
    ranges: list[tuple[int, int]],
    name: str,
    parts: int = 1,
) -> str:
    """``Σ w · x`` of one stride-1 convolution by integer weights ``w`` [Co, Ci, kh, kw] over
    the planes of ``x``, recombined in int32: [1, Co, H, W] (over ``1/parts`` of the input's
    positions, for the count of products)."""
    co, ci, kh, kw = w.shape
    z, digits = weight_digits(w)
    flat = [d.reshape(co, -1) for d in digits]
    bound = recombination_bound(flat, ranges, np.zeros(co, dtype=np.int64), g.bits)
    if bound > INT32_MAX:
        raise NotGraphExact(f"{name}: its plane recombination could reach {bound} > 2^31 - 1")
    zp = g.const(np.array(z), np.uint8)
    acc = ""
    for i, d in enumerate(digits):
        used = np.flatnonzero(np.abs(d).sum(axis=(0, 2, 3)))
        if used.size == 0 and (i > 0 or len(digits) > 1):
            continue
        if used.size in (0, ci):
            used, srcs = np.arange(ci), planes
        else:  # a digit that multiplies few input channels reads only those
            index = g.const(used, np.int64)
            srcs = [g.node("Gather", [p, index], axis=1) for p in planes]
        wd = g.const((d[:, used] + z).astype(np.uint8), np.uint8)
        op_name = name.split(".phase")[0]
        made = co * used.size * kh * kw * len(srcs) // parts
        g.products[op_name] = g.products.get(op_name, 0) + made
        for j, src in enumerate(srcs):
            y = g.node("ConvInteger", [src, wd, "", zp], kernel_shape=[kh, kw], pads=pads)
            scale = 256**i * (1 << (g.bits * j))
            if scale != 1:
                y = g.node("Mul", [y, g.const(np.array(scale), np.int32)])
            acc = g.node("Add", [acc, y]) if acc else y
    return acc


def _scatter(
    g: _G,
    planes: list[str],
    w: np.ndarray,
    ranges: list[tuple[int, int]],
    name: str,
    a: Any,
    halves: bool = False,
) -> str:
    """A transposed convolution with few output channels (float32 programs): every tap's
    ``Σ_i w · x`` at every input position as one 1×1 ``ConvInteger`` (no im2col; ``Co·k²``
    rows), recombined in int32, then summed into place by a grouped float ``ConvTranspose``
    whose weights are 0 and 1 (each output: its taps' sums, each a part of the convolution's
    accumulation, so every partial sum is inside the accumulator bound, below 2^24). With
    ``halves`` the input's columns lie side by side (phases 2) and are never woven: input column
    ``u = 2j + c`` lands on output column ``2s·j + s·c − p + kx``, so each half is a transposed
    convolution of stride ``2s`` along the width with the begin pad ``p − s·c``, its own
    ``ConvInteger`` and ``ConvTranspose``; the two sums (each of a part of the terms) are
    added, exact for the same reason."""
    from onnx import TensorProto

    ci, co, k, _ = w.shape
    s, p, q = a["stride"], a["padding"], a["output_padding"]
    taps = np.ascontiguousarray(w.transpose(1, 2, 3, 0)).reshape(co * k * k, ci, 1, 1)
    one = np.zeros((co, k * k, 1, k, k))
    for t in range(k * k):
        one[:, t, 0, t // k, t % k] = 1.0
    ones = g.const(one.reshape(co * k * k, 1, k, k))
    if not halves:
        acc = _conv_integer(g, planes, taps, [0, 0, 0, 0], ranges, name)
        y = g.node(
            "ConvTranspose",
            [g.node("Cast", [acc], to=TensorProto.FLOAT), ones],
            group=co,
            kernel_shape=[k, k],
            strides=[s, s],
            pads=[p] * 4,
            output_padding=[q, q],
        )
        g.floats.add(y)
        return y
    parts = []
    for c in range(2):  # input column u = 2j + c lands on 2s·j + s·c − p + kx
        half = [_column_halves(g, plane)[c] for plane in planes]
        acc = _conv_integer(g, half, taps, [0, 0, 0, 0], ranges, name, parts=2)
        v = s - p + q - s * c  # output_padding − end pad, for the picture's width
        parts.append(
            g.node(
                "ConvTranspose",
                [g.node("Cast", [acc], to=TensorProto.FLOAT), ones],
                group=co,
                kernel_shape=[k, k],
                strides=[s, 2 * s],
                pads=[p, p - s * c, p, max(-v, 0)],
                output_padding=[q, max(v, 0)],
            )
        )
    y = g.node("Add", parts)
    g.floats.add(y)
    return y


def _conv(
    g: _G,
    program: Program,
    op: Operation,
    x: _Value,
    bias: np.ndarray,
    shift: np.ndarray | None = None,
) -> _Value:
    """A convolution or transposed convolution: ``bias + Σ w · x`` in the graph's float type
    (times ``2^−shift``, where the requantize reading it is fused: :func:`_dequantize`); a
    stride-2 transposed one phased, its phases woven by the next reader."""
    from onnx import TensorProto

    lo, hi = program.bounds[op.inputs[0]]
    ranges = plane_ranges(int(lo.min()), int(hi.max()), g.bits)
    if x.plane:
        assert len(ranges) == 1 and x.phases != 4
        planes = [x.name]
    elif x.phases == 2:  # the planes of the phased value, woven below (int8: a quarter of float)
        planes = _planes(g, x.name, ranges)
    else:
        planes = _planes(g, _weave(g, x).name, ranges)
    a, w = op.attrs, op.params["weight"].astype(np.int64)
    co = int(bias.shape[0])
    k, p = a["kernel"], a["padding"]
    n_phases = 1
    scatter = op.op == "conv_transpose2d" and a["stride"] == 2 and co < SPLIT_MIN_CHANNELS
    scatter = scatter and g.ftype is np.float32
    halves = scatter and x.phases == 2 and p >= a["stride"]  # the scatter reads them unwoven
    if x.phases == 2 and not halves:
        planes = [_weave(g, _Value(q, 2)).name for q in planes]
    if op.op == "conv2d":
        acc = _conv_integer(g, planes, w, [p] * 4, ranges, op.name)
    elif a["stride"] == 1:  # the correlation with the flipped kernel
        flipped = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
        acc = _conv_integer(g, planes, flipped, [k - 1 - p] * 4, ranges, op.name)
    else:
        acc, n_phases = _conv_transpose2(
            g, planes, w, ranges, op, co=co, scatter=scatter, halves=halves
        )
    ftype = TensorProto.FLOAT if g.ftype is np.float32 else TensorProto.DOUBLE
    if acc not in g.floats and shift is not None and n_phases != 4 and _dequantizes(g, bias):
        g.scaled.add(op.output)
        return _Value(_dequantize(g, acc, bias, shift), n_phases, co)
    if acc not in g.floats:
        acc = g.node("Cast", [acc], to=ftype)
    out = _Value(acc, n_phases, co)
    if np.any(bias):
        out = out.like(g.node("Add", [out.name, _per_channel(g, bias, out)]))
    return out


def _conv_transpose2(
    g: _G,
    planes: list[str],
    w: np.ndarray,
    ranges: list[tuple[int, int]],
    op: Operation,
    *,
    co: int,
    scatter: bool,
    halves: bool,
) -> tuple[str, int]:
    """A stride-2 transposed convolution's accumulator and its phases: scattered (one), its
    four phases merged into one convolution's channels (four), or side by side with their rows
    woven (two, the columns woven by the next reader)."""
    a = op.attrs
    k, p = a["kernel"], a["padding"]
    try:
        py = phases(k, a["stride"], p, p, a["output_padding"])
    except ValueError as e:
        raise NotGraphExact(f"{op.name}: no exact phase split ({e})") from e
    split = [phase_weights(w, py, py, ry, rx) for ry in range(2) for rx in range(2)]
    if scatter:
        return _scatter(g, planes, w, ranges, op.name, a, halves), 1
    if co < SPLIT_MIN_CHANNELS or any(s is None for s in split):
        merged, _ = phase_split_weights(w, None, py, py, "CRD")
        pads = [py.pad_begin, py.pad_begin, py.pad_end, py.pad_end]
        return _conv_integer(g, planes, merged, pads, ranges, op.name), 4
    # phases (0,0), (0,1), (1,0), (1,1) side by side: row h is row 2h's two halves then row
    # 2h + 1's, so [1, Co, H, 4W] read as [1, Co, 2H, 2W] has its rows woven
    ys = []
    for i, ph in enumerate(split):
        assert ph is not None
        ys.append(_conv_integer(g, planes, ph[0], ph[1], ranges, f"{op.name}.phase{i}"))
    size = g.node("Mul", [g.node("Shape", [ys[0]]), g.const(np.array([1, 1, 2, 2]), np.int64)])
    return g.node("Reshape", [g.node("Concat", ys, axis=3), size]), 2


def _dequantize(g: _G, acc: str, bias: np.ndarray, shift: np.ndarray) -> str:
    """``(acc + bias) · 2^−shift`` (float32) of an int32 accumulator ``acc`` [1, C, …] in two
    nodes where ``Cast``, ``Add`` and ``Mul`` take three (``bias`` holds the requantize's half:
    ``Floor`` of it is the requantize's rounding); exact where :func:`_dequantizes`."""
    scale = np.exp2(-shift.astype(np.float64))
    zero = g.const(np.zeros(shift.shape[0]), np.int32)
    y = g.node("DequantizeLinear", [acc, g.const(scale, np.float32), zero], axis=1)
    return g.node("Add", [y, g.per_channel(bias * scale)]) if np.any(bias) else y


def _dequantizes(g: _G, bias: np.ndarray) -> bool:
    """Whether a convolution's int32 accumulator, read by a fused requantize, can leave as
    ``DequantizeLinear(acc, 2^−s) + (bias + 2^(s−1)) · 2^−s`` (:func:`_dequantize`): in a
    float32 graph every partial sum (``acc`` among them) and the requantize's intermediate
    ``acc + bias + 2^(s−1)`` are integers below 2^24 (``Program.float32_exact``), so
    ``acc · 2^−s`` is exact (``DequantizeLinear`` of int32 is ``float(acc − 0) · scale``: an
    integer below 2^24 times a power of two), ``(bias + 2^(s−1)) · 2^−s`` is exact where
    ``|bias + 2^(s−1)| < 2^24`` (checked here), and their sum ``(acc + bias + 2^(s−1)) · 2^−s``
    is a multiple of 2^−s below 2^24 · 2^−s, a float32, which IEEE 754's addition returns
    exactly: ``Floor`` of it is the requantize's ``⌊(acc + bias + 2^(s−1)) / 2^s⌋``."""
    return g.ftype is np.float32 and bool(np.all(np.abs(bias) < 1 << 24))


def _halves(shift: np.ndarray) -> np.ndarray:
    return np.where(shift > 0, np.exp2(np.maximum(shift - 1, 0)), 0.0)


def _requant(g: _G, x: _Value, shift: np.ndarray, clamp: list[int] | None, half: bool) -> str:
    v = x.name
    if half and np.any(shift):
        v = g.node("Add", [v, _per_channel(g, _halves(shift), x)])
    if np.any(shift):
        scale = _per_channel(g, np.exp2(-shift.astype(np.float64)), x)
        v = g.node("Floor", [g.node("Mul", [v, scale])])
    if clamp is None:
        return v
    return g.node("Clip", [v, g.const(clamp[0]), g.const(clamp[1])])


def _igdn_to_plane(g: _G, program: Program, op: Operation) -> bool:
    """Whether an inverse GDN's output can leave its step 4 as the int8 plane its readers
    take (:func:`_round_to_plane`): a float32 graph, only convolutions read it, its clamp lies
    in one plane, and ``|x · r| < 2^23``, so ``x · r + 1/2`` is a float32."""
    lo, hi = op.attrs["clamp"]
    readers = g.readers.get(op.output, [])
    return (
        g.ftype is np.float32
        and op.output != program.output_name
        and bool(readers)
        and all(r.op in ("conv2d", "conv_transpose2d") for r in readers)
        and len(plane_ranges(lo, hi, g.bits)) == 1
        and program.roots_products[op.name] < 1 << 23
    )


def _round_to_plane(g: _G, v: str, shift: np.ndarray, clamp: list[int]) -> str:
    """``clamp(round_shift(v, s), lo, hi)`` as int8 for integers ``|v| < 2^23`` (float32) in
    two nodes where ``_requant`` and the plane's ``Cast`` take five: ``QuantizeLinear`` (ONNX:
    ``v / 2^s`` rounded half to even, saturated to int8) of ``v + 1/2``. For ``s ≥ 1``,
    ``(v + 1/2) / 2^s = (v + 2^(s−1)) / 2^s − 1/2 + 2^−(s+1)``: a multiple of ``2^−s`` less
    ``1/2 − 2^−(s+1)``, never a tie, so the nearest integer is ``⌊(v + 2^(s−1)) / 2^s⌋``;
    ``s = 0`` adds nothing (``v / 1`` is ``v``). Both sums and the division by a power of two
    are exact in float32; the clamp lies inside int8, so saturating first changes nothing."""
    c = shift.shape[0]
    half = g.per_channel(np.where(shift > 0, 0.5, 0.0))
    scale = g.const(np.exp2(shift.astype(np.float64)), np.float32)
    zero = g.const(np.zeros(c), np.int8)
    q = g.node("QuantizeLinear", [g.node("Add", [v, half]), scale, zero], axis=1)
    return g.node(
        "Clip", [q, g.const(np.array(clamp[0]), np.int8), g.const(np.array(clamp[1]), np.int8)]
    )


def _op(
    g: _G, program: Program, op: Operation, values: dict[str, _Value], fused: dict[str, Operation]
) -> _Value:
    x = values[op.inputs[0]]
    p, a = op.params, op.attrs
    if op.op in ("conv2d", "conv_transpose2d"):
        bias = p["bias"].astype(np.float64)
        if op.name in fused:  # bias + the half: the sum is the requantize's own intermediate
            bias = bias + _halves(fused[op.name].params["shift"])
        shift = fused[op.name].params["shift"] if op.name in fused else None
        return _conv(g, program, op, x, bias, shift)
    if op.op == "channel_affine":
        y = g.node("Mul", [x.name, _per_channel(g, p["scale"], x)])
        out = x.like(g.node("Add", [y, _per_channel(g, p["offset"], x)]))
    elif op.op == "requantize":
        half = not any(f is op for f in fused.values())
        if np.any(p["multiplier"] != 1):
            x = x.like(g.node("Mul", [x.name, _per_channel(g, p["multiplier"], x)]))
        if op.inputs[0] in g.scaled:  # the convolution's DequantizeLinear scaled it already
            y = g.node("Floor", [x.name])
            out = x.like(g.node("Clip", [y, g.const(a["clamp"][0]), g.const(a["clamp"][1])]))
        else:
            out = x.like(_requant(g, x, p["shift"], a["clamp"], half))
    elif op.op == "igdn":
        if g.ftype is not np.float32:
            raise NotGraphExact(f"{op.name}: an inverse GDN outside a float32-exact program")
        if x.phases == 4:
            x = _weave(g, x)
        c = p["beta"].shape[0]  # the 1×1 convolution and the rest run phased or not alike
        sq = x.like(g.node("Mul", [x.name, x.name]))
        q = _requant(g, sq, np.full(c, a["square_shift"]), None, True)
        gamma = g.const(p["gamma"].reshape(c, c, 1, 1))
        n = g.node("Conv", [q, gamma, g.const(p["beta"])])
        r = g.node("Floor", [g.node("Sqrt", [n])])
        xr = g.node("Mul", [x.name, r])
        if _igdn_to_plane(g, program, op):
            plane = _round_to_plane(g, xr, p["shift"], a["clamp"])
            return _Value(plane, x.phases, x.channels, plane=True)
        out = x.like(_requant(g, x.like(xr), p["shift"], a["clamp"], True))
    else:
        x, other = _weave(g, x), _weave(g, values[op.inputs[1]])
        out = _Value(g.node("Add" if op.op == "add" else "Mul", [x.name, other.name]))
    return out


def build_model(program: Program) -> tuple[bytes, dict[str, int]]:
    """The program as one ONNX model (``symbols``, the graph's float type, in; ``out`` out),
    and each convolution's int8 products per position of its input (``bench int``'s floor)."""
    import onnx
    from onnx import TensorProto, helper

    ftype = np.float32 if program.float32_exact else np.float64
    g = _G(ftype, PLANE_BITS)
    values = {program.input_name: _Value("symbols")}
    fused = requantize_readers(program)
    for op in program.operations:
        for v in op.inputs:
            g.readers.setdefault(v, []).append(op)
    for op in program.operations:
        values[op.output] = _op(g, program, op, values, fused)
    out = _weave(g, values[program.output_name])
    g.nodes.append(helper.make_node("Identity", [out.name], ["out"], name="out"))
    t = TensorProto.FLOAT if ftype is np.float32 else TensorProto.DOUBLE
    graph = helper.make_graph(
        g.nodes,
        "wai-ops-int8",
        [helper.make_tensor_value_info("symbols", t, [1, program.input_channels, "h", "w"])],
        [helper.make_tensor_value_info("out", t, [1, program.output_channels, None, None])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString()), g.products


def products_per_mac(program: Program, products: dict[str, int]) -> float:
    """The int8 products the engine computes a multiply-accumulate of ``program``, over all its
    convolutions (``products``: :func:`build_model`'s count per input position), each weighted
    by its share of the program's multiply-accumulates: ``Ci·Co·k²`` per input position, the
    positions followed through the strides (a stride-2 transposed convolution's output has 4×
    its input's; ``conv2d`` is stride 1). One plane by one weight digit is 1; the chooser's
    rule reads it (:mod:`paths.waiops.choose`), ``int_synth_quality`` prints it."""
    scale = {program.input_name: 1.0}
    made = macs = 0.0
    for op in program.operations:
        here = scale[op.inputs[0]]
        scale[op.output] = here
        if op.op in ("conv2d", "conv_transpose2d"):
            made += products[op.name] * here
            macs += int(op.params["weight"].size) * here
        if op.op == "conv_transpose2d":
            scale[op.output] = here * op.attrs["stride"] ** 2
    return made / macs if macs else 0.0


class Int8GraphEngine:
    """A program compiled once into one ONNX Runtime session whose convolutions are
    ``ConvInteger``; thread-safe."""

    name = "int8-graph"

    def __init__(self, program: Program) -> None:
        import onnxruntime as ort

        if any(op.op == "igdn" for op in program.operations):
            check_sqrt()
        self.program = program
        self._ftype = np.float32 if program.float32_exact else np.float64
        self.model, self.products = build_model(program)
        self.per_mac = products_per_mac(program, self.products)
        self.session = ort.InferenceSession(
            self.model, shared_session_options(), providers=["CPUExecutionProvider"]
        )

    def run(
        self, symbols: np.ndarray, limits: Limits | None = None, *, shrink_arena: bool = False
    ) -> np.ndarray:
        """The program on ``symbols`` (int [1, C, h, w]) → int32 [1, C', H, W]."""
        x = check_input(self.program, symbols, limits).astype(self._ftype)
        options = arena_shrink_options() if shrink_arena else None
        (out,) = self.session.run(["out"], {"symbols": x}, options)
        return np.asarray(out).astype(np.int32)


__all__ = [
    "Int8GraphEngine",
    "NotGraphExact",
    "build_model",
    "plane_ranges",
    "products_per_mac",
    "set_plane_bits",
    "weight_digits",
]
