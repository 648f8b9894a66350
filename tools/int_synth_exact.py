"""The integer set writer's calibration forward passes in exact arithmetic (docs/int-synth-set.md,
"Determinism"): the bmshj2018 analysis and the float synthesis, every value a pure function of
the input bytes whatever the CPU, its SIMD path, the BLAS or the thread count.

Every convolution runs on integer-valued float64 tensors whose products and partial sums are
proven below 2^53 (checked with Python integers before each one), so any summation order gives
the same bits; everything else is correctly rounded elementwise float64. Convolutions run on
strips of output rows (at most :data:`STRIP_BYTES` of im2col each) on the whole input's grid,
so the strips change no bit (docs/encode.md, "Memory")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from wai_dispatch.tools import analysis_strips as strips

#: Significant bits of the snapped weights (per tensor, relative to its largest |w|).
WEIGHT_BITS = 20
#: Every partial sum of a convolution is at most 2^SUM_BITS in magnitude (bias included < 2^53).
SUM_BITS = 52
#: The most bytes one strip of a forward convolution's im2col columns takes (``ExactConv``):
#: with it the analysis's memory is its activations (module doc, "Memory") plus a constant.
STRIP_BYTES = 64 << 20


#: A strip's report: ``(strips done, strips in all)``, or no report.
Strip = Callable[[int, int], None] | None
#: A report of progress: ``(stages done, stages in all, what runs)``, or no report.
Report = Callable[[int, int, str], None] | None
#: An input's grid (:meth:`ExactConv.grid`): whether it is all zeros, its fraction bits, the
#: product's, and the bias on the product's grid.
Grid = tuple[bool, int, int, np.ndarray]
#: kind → (kernel, stride, padding) of the forward convolutions.
_GEOMETRY = {"conv": (5, 2, 2), "conv3": (3, 1, 1), "pointwise": (1, 1, 0)}


class ExactConv:
    """A convolution (``conv2d`` k5 s2 p2, ``conv_transpose2d`` k5 s2 p2 op1, ``conv2d`` k3 s1
    p1, or a 1×1 ``conv2d``) evaluated exactly on a fixed-point grid, forward ones in strips of
    output rows (module doc)."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, kind: str) -> None:
        w = np.asarray(weight, dtype=np.float64)
        self.kind = kind
        self.w_int, self.w_frac = snap(w, WEIGHT_BITS)
        out_axis = 1 if kind == "transposed" else 0
        l1 = np.abs(self.w_int.astype(np.int64)).sum(
            axis=tuple(a for a in range(4) if a != out_axis)
        )
        self.l1 = int(l1.max())
        # |x_int| ≤ 2^x_bits with 2^x_bits · l1 ≤ 2^SUM_BITS.
        self.x_bits = max(0, ((1 << SUM_BITS) // max(self.l1, 1)).bit_length() - 1)
        self.bias = np.asarray(bias, dtype=np.float64)
        self._w: Any = None  # the torch tensor, made on first use

    def __call__(
        self, x: np.ndarray, *, square: bool = False, on_strip: Strip = None
    ) -> np.ndarray:
        """The convolution of ``x`` (of ``x · x`` with ``square``, never held whole), float64
        [1, C_out, H_out, W_out]; ``on_strip(done, total)`` after each strip."""
        if self.kind == "transposed":  # the synthesis's (calibration only): one piece
            peak = _peak(x, square)
            x_frac, frac, b_int = self._grid(peak)
            v = x * x if square else x
            acc = self._conv(np.zeros_like(v) if peak == 0.0 else _snapped(v, x_frac))
            whole: np.ndarray = np.ldexp(acc + b_int[None, :, None, None], -frac)
            return whole
        return self.rows(x, 0, x.shape[2], self.grid(_peak(x, False), square), square, on_strip)

    def rows(
        self,
        x: np.ndarray,
        lo: int,
        height: int,
        grid: Grid,
        square: bool = False,
        on_strip: Strip = None,
        span: tuple[int, int] | None = None,
    ) -> np.ndarray:
        """Output rows ``span`` (all) of the convolution, ``x`` being the input's rows from
        ``lo`` of ``height`` (zero rows beyond), on ``grid`` (:meth:`grid`)."""
        k, s, p = _GEOMETRY[self.kind]
        a, b = span or (0, (height + 2 * p - k) // s + 1)
        out_w = (x.shape[3] + 2 * p - k) // s + 1
        out = np.empty((1, self.w_int.shape[0], b - a, out_w), dtype=np.float64)

        def put(r0: int, r1: int, values: np.ndarray) -> None:
            out[:, :, r0 - a : r1 - a] = values

        self._strips(x, (lo, height, a, b), grid, square, put, on_strip)
        return out

    def divide(self, x: np.ndarray, *, on_strip: Strip = None, grid: Grid | None = None) -> None:
        """GDN in place, ``x ← x / sqrt(β + Σ γ x²)`` (this being the 1×1 convolution of γ
        and β), strip by strip: the same bits as ``x / np.sqrt(self(x * x))``; ``grid``: the
        one of ``x · x`` (:meth:`grid`; default: ``x``'s own)."""
        if self.kind != "pointwise":
            raise ValueError(f"divide is GDN's, a pointwise convolution, not {self.kind}")

        def put(r0: int, r1: int, n: np.ndarray) -> None:
            x[:, :, r0:r1] /= np.sqrt(n)  # rows r0:r1 are read before they are written

        height = x.shape[2]
        grid = grid or self.grid(_peak(x, False), True)
        self._strips(x, (0, height, 0, height), grid, True, put, on_strip)

    def grid(self, peak: float, square: bool = False) -> Grid:
        """The grid of an input whose largest ``|value|`` is ``peak`` (of ``x · x`` with
        ``square``: ``peak²``, the largest square)."""
        if square:
            peak *= peak
        return (peak == 0.0, *self._grid(peak))

    def _grid(self, peak: float) -> tuple[int, int, np.ndarray]:
        """The input's fraction bits, the product's and the bias on its grid, for an input
        whose largest |value| is ``peak``: the most bits for which every partial sum is
        below 2^53 (checked with Python integers)."""
        for bits in range(self.x_bits, -1, -1):  # fewer bits for x while the bias breaks it
            x_frac = 0 if peak == 0.0 else bits - int(np.frexp(peak)[1])
            frac = self.w_frac + x_frac
            b_int = np.rint(np.ldexp(self.bias, frac))
            # max|rint(ldexp(v, f))| = rint(ldexp(max|v|, f)): both are monotonic in |v|
            x_max = int(np.rint(np.ldexp(peak, x_frac)))
            b_max = int(np.abs(b_int).max()) if b_int.size else 0
            if x_max * self.l1 + b_max < 1 << 53:  # the bound on every partial sum, exact ints
                return x_frac, frac, b_int
        raise ArithmeticError(f"exact convolution out of range: {x_max}·{self.l1} + {b_max}")

    def _conv(self, x_int: np.ndarray, padding: tuple[int, int] = (0, 0)) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        if self._w is None:
            self._w = torch.from_numpy(self.w_int)
        xt = torch.from_numpy(x_int)
        with torch.no_grad():  # float64: im2col + GEMM (no oneDNN); exact whatever the kernel
            if self.kind == "transposed":
                acc = F.conv_transpose2d(xt, self._w, None, 2, 2, output_padding=1)
            else:
                s = _GEOMETRY[self.kind][1]
                acc = F.conv2d(xt, self._w, None, s, padding)
        out: np.ndarray = acc.numpy()
        return out

    def _strips(
        self,
        x: np.ndarray,
        where: tuple[int, int, int, int],
        grid: Grid,
        square: bool,
        put: Callable[[int, int, np.ndarray], None],
        on_strip: Strip,
    ) -> None:
        """Output rows ``a:b`` into ``put``, ``where = (lo, height, a, b)``: ``x`` holds the
        input's rows from ``lo`` of ``height``, zero rows beyond them."""
        lo, height, a, b = where
        k, s, p = _GEOMETRY[self.kind]
        zero, x_frac, frac, b_int = grid
        out_w = (x.shape[3] + 2 * p - k) // s + 1
        row_bytes = 8 * x.shape[1] * k * k * max(out_w, 1)  # one output row's im2col columns
        rows = max(1, STRIP_BYTES // row_bytes)
        total = -(-(b - a) // rows)
        for done, r0 in enumerate(range(a, b, rows), start=1):
            r1 = min(b, r0 + rows)
            top, bottom = r0 * s - p, (r1 - 1) * s - p + k  # the input rows, zero rows beyond x
            piece = x[:, :, max(top, 0) - lo : min(bottom, height) - lo]
            if zero:  # an input of zeros (of either sign) snaps to +0, as snap() does
                x_int = np.zeros(piece.shape, dtype=np.float64)
            else:
                x_int = _snapped(piece * piece if square else piece, x_frac)
            if top < 0 or bottom > height:
                pads = (max(-top, 0), max(bottom - height, 0))
                x_int = np.pad(x_int, ((0, 0), (0, 0), pads, (0, 0)))
            acc = self._conv(x_int, (0, p))
            acc += b_int[None, :, None, None]  # integers below 2^53: exact
            put(r0, r1, np.ldexp(acc, -frac))
            if on_strip is not None:
                on_strip(done, total)


class Steps:
    """Progress through an analysis: ``report(stages begun, stages in all, note)`` as each
    stage begins and after each of its strips; with no ``report``, nothing."""

    def __init__(self, report: Report, total: int) -> None:
        self.report, self.total, self.begun = report, total, 0

    def stage(self, name: str) -> Strip:
        """Stage ``name`` begins; its strips' report (``None`` without a ``report``)."""
        report, begun, total = self.report, self.begun, self.total
        self.begun += 1
        if report is None:
            return None
        report(begun, total, name)

        def strip(done: int, strips: int) -> None:
            report(begun, total, f"{name}, strip {done}/{strips}")

        return strip


def _peak(x: np.ndarray, square: bool) -> float:
    """``max |x|`` (of ``x · x`` with ``square``), computed a few rows at a time."""
    rows = max(1, STRIP_BYTES // max(8 * x[0, :, :1].size, 1))
    peak = 0.0
    for r0 in range(0, x.shape[2], rows):
        piece = np.abs(x[:, :, r0 : r0 + rows])
        if square:
            piece *= piece
        if piece.size:
            peak = max(peak, float(piece.max()))
    return peak


def _snapped(v: np.ndarray, frac: int) -> np.ndarray:
    """``round(v · 2^frac)``: a grid chosen for the whole tensor, applied to part of it."""
    return np.rint(np.ldexp(v.astype(np.float64), frac))


def snap(v: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """``(round(v · 2^f), f)`` with ``f`` the largest making every ``|round(v · 2^f)| ≤ 2^bits``
    (exact: ``frexp`` and ``ldexp`` only; float64 integer values)."""
    peak = float(np.abs(v).max()) if v.size else 0.0
    if peak == 0.0:
        return np.zeros_like(v, dtype=np.float64), 0
    frac = bits - int(np.frexp(peak)[1])  # peak < 2^e, so |v · 2^frac| < 2^bits
    return np.rint(np.ldexp(v.astype(np.float64), frac)), frac


def nonnegative(raw: np.ndarray, bound: np.ndarray, pedestal: np.ndarray) -> np.ndarray:
    """CompressAI's ``NonNegativeParametrizer``: ``max(x, bound)² − pedestal`` in float32
    (elementwise, correctly rounded: the bits torch computes)."""
    x = np.maximum(raw.astype(np.float32), np.float32(bound.reshape(-1)[0]))
    return (x * x - np.float32(pedestal.reshape(-1)[0])).astype(np.float32)


def _gdn_params(state: Mapping[str, Any], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    def arr(name: str) -> np.ndarray:
        return np.asarray(state[f"{prefix}.{name}"].detach().numpy())

    beta = nonnegative(
        arr("beta"), arr("beta_reparam.lower_bound.bound"), arr("beta_reparam.pedestal")
    )
    gamma = nonnegative(
        arr("gamma"), arr("gamma_reparam.lower_bound.bound"), arr("gamma_reparam.pedestal")
    )
    c = beta.size
    return beta, gamma.reshape(c, c, 1, 1)


class _Layer:
    """One of ``g_a``'s exact layers along rows (tools/analysis_strips.py), on the grid of an
    input whose largest ``|value|`` is ``peak``; ``peak``, then: its outputs' so far."""

    def __init__(self, conv: ExactConv, gdn: bool, peak: float) -> None:
        self.conv, self.gdn = conv, gdn
        self.geometry = _GEOMETRY[conv.kind]
        self.grid = conv.grid(peak, gdn)
        self.peak = 0.0

    def rows(self, x: np.ndarray, lo: int, height: int, a: int, b: int) -> np.ndarray:
        if self.gdn:  # pointwise: the piece is rows a:b, divided in place
            self.conv.divide(x, grid=self.grid)
            out = x
        else:
            out = self.conv.rows(x, lo, height, self.grid, span=(a, b))
        if out.size:
            self.peak = max(self.peak, float(out.max()), -float(out.min()))
        return out


def _put(y: np.ndarray, a: int, b: int, rows: np.ndarray) -> None:
    y[:, :, a:b] = rows


class ExactAnalysis:
    """``g_a`` of a bmshj2018 model (conv, GDN, conv, GDN, conv, GDN, conv) and the symbols
    ``round(y − median)``, exact on fixed-point grids (module doc), in strips of latent rows
    (tools/analysis_strips.py). Each layer's grid is that of its whole input's largest
    ``|value|``: a first pass in float32 (the model's own ``g_a``) finds each nearly, the
    exact pass checks each on the way, and a grid the exact peak does not confirm (a peak
    within float32's error of a power of two) is corrected and the exact pass run again."""

    def __init__(self, model: Any) -> None:
        state = model.state_dict()
        self.float_g_a = model.g_a
        self.layers: list[tuple[ExactConv, bool]] = []
        for i in range(4):
            w = state[f"g_a.{2 * i}.weight"].detach().numpy()
            b = state[f"g_a.{2 * i}.bias"].detach().numpy()
            self.layers.append((ExactConv(w, b, "conv"), False))
            if i < 3:
                beta, gamma = _gdn_params(state, f"g_a.{2 * i + 1}")
                self.layers.append((ExactConv(gamma, beta, "pointwise"), True))
        medians = state["entropy_bottleneck.quantiles"].detach().numpy()[:, 0, 1]
        self.medians = medians.astype(np.float64)

    #: The stages :meth:`latent` reports to its :class:`Steps`: the float pass, the exact one.
    STAGES = 2

    def latent(self, picture: np.ndarray, steps: Steps | None = None) -> np.ndarray:
        """``y = g_a(picture / 255)``, picture uint8 HWC; float64 [1, M, H/16, W/16]."""
        import torch

        steps = steps or Steps(None, self.STAGES)
        height, width = picture.shape[:2]
        first = self.layers[0][0].w_int.shape[0]
        rows = strips.latent_rows(first, width // 2, 8)

        def pixels(lo: int, hi: int) -> Any:
            return (
                torch.from_numpy(np.ascontiguousarray(picture[lo:hi]))
                .permute(2, 0, 1)[None]
                .float()
                / 255
            )

        def exact(lo: int, hi: int) -> np.ndarray:
            x = np.ascontiguousarray(picture[lo:hi].transpose(2, 0, 1)[None]).astype(np.float64)
            x /= 255.0
            return x

        guess = [strips.TorchLayer(m) for m in self.float_g_a]
        with torch.inference_mode():
            strips.run(guess, pixels, height, rows, lambda *_: None, steps.stage("g_a, float"))
        top = float(np.float64(picture.max()) / 255.0) if picture.size else 0.0
        peaks = [top, *[g.peak for g in guess][:-1]]
        while True:
            chain = [_Layer(c, gdn, p) for (c, gdn), p in zip(self.layers, peaks, strict=True)]
            tall, wide = strips.heights(chain, height)[-1], strips.heights(chain, width)[-1]
            y = np.empty((1, self.layers[-1][0].w_int.shape[0], tall, wide), dtype=np.float64)
            strips.run(chain, exact, height, rows, partial(_put, y), steps.stage("g_a"))
            seen = [top, *[c.peak for c in chain][:-1]]
            wrong = [
                i
                for i, (c, p) in enumerate(zip(chain, seen, strict=True))
                if c.grid[:3] != c.conv.grid(p, c.gdn)[:3]
            ]
            if not wrong:
                return y
            peaks = peaks[: wrong[0]] + seen[wrong[0] :]

    def symbols(self, picture: np.ndarray) -> np.ndarray:
        """``round(y − median)`` (half to even, as torch.round), int32."""
        y = self.latent(picture)
        out: np.ndarray = np.rint(y - self.medians[None, :, None, None]).astype(np.int32)
        return out


class ExactSynthesis:
    """The float synthesis (four transposed convolutions, three inverse GDNs) from a set's
    float32 weights, returning every layer's output (``a{i}``, ``y{i}``), exact on grids."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        self.deconv = [
            ExactConv(weights[f"deconv{i}.weight"], weights[f"deconv{i}.bias"], "transposed")
            for i in range(1, 5)
        ]
        self.norm = []
        for i in range(1, 4):
            beta = weights[f"igdn{i}.beta"]
            c = beta.size
            self.norm.append(
                ExactConv(weights[f"igdn{i}.gamma"].reshape(c, c, 1, 1), beta, "pointwise")
            )

    def __call__(self, latent: np.ndarray) -> dict[str, np.ndarray]:
        acts: dict[str, np.ndarray] = {}
        x = latent
        for i in range(4):
            x = self.deconv[i](x)
            acts[f"a{i + 1}"] = x
            if i < 3:
                x = x * np.sqrt(self.norm[i](x, square=True))
                acts[f"y{i + 1}"] = x
        return acts
