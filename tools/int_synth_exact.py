"""The integer set writer's calibration forward passes in exact arithmetic (docs/int-synth-set.md,
"Determinism"): the bmshj2018 analysis (picture → symbols) and the float synthesis (symbols →
per-layer activations), computed so that every value is a pure function of the input bytes,
whatever the CPU, its SIMD path, the BLAS or the thread count.

Every convolution runs on **integer-valued float64 tensors**: the weights and the input are each
snapped to a fixed-point grid (a power-of-two scale, ``round(v · 2^f)``) with magnitudes bounded so
that ``max|x| · max_o Σ|w_o| + max|b| < 2^53``. Every product and every partial sum of the
convolution is then an integer below 2^53, exact in float64, so any summation order (any BLAS
kernel, blocking, thread split, FMA or not) gives the same bits; the bound is checked with Python
integers before each convolution. Everything else is elementwise IEEE float64 (``+ - * /``,
``sqrt``, ``rint``, ``ldexp``): correctly rounded, the same on every CPU. No transcendental
function is used. The grids are fine (20-bit weights, activations as many bits as the bound
allows, 2^-52 relative to the layer's largest partial sum), so the result is the float model's to
about 1e-6 relative; it only feeds calibration statistics and symbols, never the decode."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Significant bits of the snapped weights (per tensor, relative to its largest |w|).
WEIGHT_BITS = 20
#: Every partial sum of a convolution is at most 2^SUM_BITS in magnitude (bias included < 2^53).
SUM_BITS = 52


class ExactConv:
    """A convolution (``conv2d`` k5 s2 p2, ``conv_transpose2d`` k5 s2 p2 op1, ``conv2d`` k3 s1
    p1, or a 1×1 ``conv2d``) evaluated exactly on a fixed-point grid (module doc)."""

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

    def __call__(self, x: np.ndarray) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        for bits in range(self.x_bits, -1, -1):  # fewer bits for x while the bias breaks it
            x_int, x_frac = snap(x, bits)
            frac = self.w_frac + x_frac
            b_int = np.rint(np.ldexp(self.bias, frac))
            x_max = int(np.abs(x_int).max()) if x_int.size else 0
            b_max = int(np.abs(b_int).max()) if b_int.size else 0
            if x_max * self.l1 + b_max < 1 << 53:  # the bound on every partial sum, exact ints
                break
        else:
            raise ArithmeticError(f"exact convolution out of range: {x_max}·{self.l1} + {b_max}")
        if self._w is None:
            self._w = torch.from_numpy(self.w_int)
        xt = torch.from_numpy(x_int)
        with torch.no_grad():  # float64: im2col + GEMM (no oneDNN); exact whatever the kernel
            if self.kind == "transposed":
                acc = F.conv_transpose2d(xt, self._w, None, 2, 2, output_padding=1)
            elif self.kind == "conv":
                acc = F.conv2d(xt, self._w, None, 2, 2)
            elif self.kind == "conv3":  # k3 s1 p1 (the hyperprior's h_a and h_s)
                acc = F.conv2d(xt, self._w, None, 1, 1)
            else:
                acc = F.conv2d(xt, self._w)
        out = acc.numpy() + b_int[None, :, None, None]  # integers below 2^53: exact
        scaled: np.ndarray = np.ldexp(out, -frac)
        return scaled


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


class ExactAnalysis:
    """``g_a`` of a bmshj2018 model (conv, GDN, conv, GDN, conv, GDN, conv) and the symbols
    ``round(y − median)``, exact on fixed-point grids (module doc)."""

    def __init__(self, model: Any) -> None:
        state = model.state_dict()
        self.layers: list[tuple[ExactConv, ExactConv | None, np.ndarray | None]] = []
        for i in range(4):
            w = state[f"g_a.{2 * i}.weight"].detach().numpy()
            b = state[f"g_a.{2 * i}.bias"].detach().numpy()
            if i < 3:
                beta, gamma = _gdn_params(state, f"g_a.{2 * i + 1}")
                norm = ExactConv(gamma, beta, "pointwise")
                self.layers.append((ExactConv(w, b, "conv"), norm, beta))
            else:
                self.layers.append((ExactConv(w, b, "conv"), None, None))
        medians = state["entropy_bottleneck.quantiles"].detach().numpy()[:, 0, 1]
        self.medians = medians.astype(np.float64)

    def latent(self, picture: np.ndarray) -> np.ndarray:
        """``y = g_a(picture / 255)``, picture uint8 HWC; float64 [1, M, H/16, W/16]."""
        x = np.ascontiguousarray(picture.transpose(2, 0, 1)[None]).astype(np.float64) / 255.0
        for conv, norm, _ in self.layers:
            x = conv(x)
            if norm is not None:
                n = norm(x * x)  # β + Σ γ x², exact on the grid of x²
                x = x / np.sqrt(n)  # GDN: x · rsqrt(n), as two correctly rounded operations
        return x

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
                x = x * np.sqrt(self.norm[i](x * x))
                acts[f"y{i + 1}"] = x
        return acts
