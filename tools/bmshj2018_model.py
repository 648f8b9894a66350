"""The CompressAI bmshj2018-factorized model the float set is written from: loading it (a
checkpoint, the bundled demo weights, or CompressAI's pretrained zoo weights) with its entropy
tables, and its synthesis rewritten as a plain network (GDN's reparameterised β and γ taken as
plain values) that is bit-identical to CompressAI's ``g_s``. The set writer
(:mod:`tools.wai_bmshj2018_npu_set`) and the integer set's tools read the model from here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from wai_dispatch.codec.sets.manifest import hash_file
from wai_dispatch.tools._compressai import checkpoint_state_dict, factorized_prior
from wai_dispatch.tools.errors import SetWriterRefused

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_CHECKPOINT = REPO_ROOT / "conformance" / "weights" / "bmshj2018-demo-q3.pt"


class SetWriterError(SetWriterRefused):
    """The set is refused; the message says why (one typed line, exit status 2)."""


class SynthesisMismatch(SetWriterError):
    """The plain synthesis is not bit-identical to CompressAI's ``g_s`` (§6.1)."""


# -- the model -----------------------------------------------------------------------------------


def architecture(quality: int) -> tuple[int, int]:
    """CompressAI's (N, M) of bmshj2018_factorized at ``quality``."""
    if not 1 <= quality <= 8:
        raise SetWriterError(f"quality {quality}: bmshj2018-factorized has qualities 1 to 8")
    return (128, 192) if quality <= 5 else (192, 320)


def architecture_of(state: dict[str, Any], default: tuple[int, int]) -> tuple[int, int]:
    """(N, M) as the state dict's own synthesis holds them (``g_s.0`` is a transposed
    convolution M → N: a checkpoint of any width, a freshly initialised model's included), else
    ``default`` (the quality's; loading then refuses the state dict, naming the cause)."""
    weight = state.get("g_s.0.weight")
    if isinstance(weight, torch.Tensor) and weight.ndim == 4 and min(weight.shape[:2]) >= 1:
        return int(weight.shape[1]), int(weight.shape[0])
    return default


def model_architecture(model: Any) -> tuple[int, int]:
    """(N, M) of a loaded bmshj2018 model (factorized or hyperprior), from its ``g_s``."""
    first = model.g_s[0]
    return int(first.out_channels), int(first.in_channels)


#: How the tables were cut, as the set records it: CompressAI's ``update(force=True)`` states
#: nothing (so the bundled set's bytes stay as they are); ``update_quantiles=True`` is recorded.
TABLES_UPDATE_FACT: dict[bool, dict[str, Any]] = {False: {}, True: {"update_quantiles": True}}


def load_model(
    *,
    checkpoint: str | os.PathLike[str] | None,
    pretrained: bool,
    quality: int,
    update_quantiles: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """The model in eval mode with its tables as :func:`update_tables` rules, and where its
    weights came from."""

    n, m = architecture(quality)
    if pretrained:
        if checkpoint is not None:
            raise SetWriterError("give --checkpoint or --pretrained, not both")
        from compressai.zoo import bmshj2018_factorized

        model = bmshj2018_factorized(quality, metric="mse", pretrained=True)
        state, what = model.state_dict(), "the zoo's weights"
        origin = {
            "kind": "pretrained",
            "source": f"compressai.zoo.bmshj2018_factorized(quality={quality}, metric='mse', "
            "pretrained=True)",
        }
    else:
        path = Path(checkpoint) if checkpoint is not None else DEMO_CHECKPOINT
        if not path.is_file():
            raise SetWriterError(f"checkpoint {path} not found (or give --pretrained)")
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise SetWriterError(f"checkpoint {path}: cannot be read: {_one_line(exc)}") from exc
        try:
            state = checkpoint_state_dict(loaded)
        except ValueError as exc:
            raise SetWriterError(f"checkpoint {path}: {exc}") from exc
        n, m = architecture_of(state, (n, m))
        model = factorized_prior(n, m)
        try:
            model.load_state_dict(state)
        except (RuntimeError, KeyError) as exc:
            raise SetWriterError(
                f"checkpoint {path}: not a FactorizedPrior({n}, {m}) state dict "
                f"(quality {quality}): {_one_line(exc)}"
            ) from exc
        what = f"checkpoint {path}"
        digest = hash_file(path)[0]
        demo = DEMO_CHECKPOINT.is_file() and digest == hash_file(DEMO_CHECKPOINT)[0]
        origin = {"kind": "demo" if demo else "checkpoint", "file": path.name, "blake3": digest}
    model = model.eval()
    update_tables(model, state, what, update_quantiles=update_quantiles)
    return model, origin


def update_tables(model: Any, state: Any, what: str, *, update_quantiles: bool) -> None:
    """The one rule both set writers follow (docs/bmshj2018-set.md, *Checkpoints*): a
    checkpoint that carries its entropy tables (saved after ``net.update()``: CompressAI's
    update_model, the zoo's weights, the demo weights) keeps them, as CompressAI's own
    ``update()`` without force does: they are the checkpoint's bytes, not torch's float32
    logistic on this CPU (whose vectorised tanh/sigmoid differ between ISAs, "Determinism"). One
    saved before ``update()`` (any table empty) is refused, unless ``update_quantiles`` asks to
    cut them all here as CompressAI's ``update(force=True, update_quantiles=True)`` does."""
    keys = [k for k in model.state_dict() if k.endswith("._quantized_cdf")]
    if not update_quantiles and any(state.get(k) is None or state[k].numel() == 0 for k in keys):
        raise SetWriterError(
            f"{what}: its entropy tables are empty (saved before net.update()), "
            "so the tables your bitstreams were coded with are not in it; save it after "
            "net.update(), or give --update-quantiles to cut them here as CompressAI's "
            "update(force=True, update_quantiles=True) does"
        )
    model.update(force=update_quantiles, update_quantiles=update_quantiles)


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:400]


class PlainInverseGDN(nn.Module):
    """Inverse GDN with β and γ as values: ``x * sqrt(conv1x1(x * x, γ) + β)``."""

    def __init__(self, beta: torch.Tensor, gamma: torch.Tensor) -> None:
        super().__init__()
        channels = beta.shape[0]
        self.gamma = nn.Parameter(gamma.detach().reshape(channels, channels, 1, 1).clone())
        self.beta = nn.Parameter(beta.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The same kernels, in the same order, as compressai.layers.GDN(inverse=True).
        return x * torch.sqrt(F.conv2d(x * x, self.gamma, self.beta))


class _CompressAIGDN(Protocol):
    """``compressai.layers.GDN`` as read here (CompressAI publishes no types)."""

    beta: torch.Tensor
    gamma: torch.Tensor

    def beta_reparam(self, x: torch.Tensor) -> torch.Tensor: ...

    def gamma_reparam(self, x: torch.Tensor) -> torch.Tensor: ...


def _pair(value: str | tuple[int, ...], what: str) -> tuple[int, int]:
    """A convolution's two-dimensional size (kernel, stride, padding) as the pair it is."""
    if isinstance(value, str) or len(value) != 2:
        raise SetWriterError(f"g_s deconvolution {what} is {value!r}, not a (height, width) pair")
    return value[0], value[1]


class PlainSynthesis(nn.Module):
    """``g_s`` as four transposed convolutions and three plain inverse GDNs."""

    deconv1: nn.ConvTranspose2d
    deconv2: nn.ConvTranspose2d
    deconv3: nn.ConvTranspose2d
    deconv4: nn.ConvTranspose2d
    igdn1: PlainInverseGDN
    igdn2: PlainInverseGDN
    igdn3: PlainInverseGDN

    def __init__(self, g_s: nn.Sequential) -> None:
        super().__init__()
        layers = list(g_s)
        if len(layers) != 7:
            raise SetWriterError(f"g_s has {len(layers)} layers, bmshj2018's has 7")
        for i in range(4):
            deconv = layers[2 * i]
            if not isinstance(deconv, nn.ConvTranspose2d):
                raise SetWriterError(f"g_s[{2 * i}] is {type(deconv).__name__}")
            copy = nn.ConvTranspose2d(
                deconv.in_channels,
                deconv.out_channels,
                _pair(deconv.kernel_size, "kernel_size"),
                stride=_pair(deconv.stride, "stride"),
                padding=_pair(deconv.padding, "padding"),
                output_padding=_pair(deconv.output_padding, "output_padding"),
            )
            copy.load_state_dict(deconv.state_dict())
            setattr(self, f"deconv{i + 1}", copy)
            if i < 3:
                layer = layers[2 * i + 1]
                if not getattr(layer, "inverse", False):
                    raise SetWriterError(f"g_s[{2 * i + 1}] is not an inverse GDN")
                gdn = cast(_CompressAIGDN, layer)
                beta = gdn.beta_reparam(gdn.beta)
                gamma = gdn.gamma_reparam(gdn.gamma)
                setattr(self, f"igdn{i + 1}", PlainInverseGDN(beta, gamma))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.igdn1(self.deconv1(x))
        x = self.igdn2(self.deconv2(x))
        x = self.igdn3(self.deconv3(x))
        out: torch.Tensor = self.deconv4(x)  # Module.__call__ is typed as returning Any
        return out

    def layers(self) -> list[dict[str, Any]]:
        """The layers as weight references (for the WebNN form)."""
        out: list[dict[str, Any]] = []
        for i in range(1, 5):
            d = getattr(self, f"deconv{i}")
            out.append(
                {
                    "kind": "deconv",
                    "weight": f"deconv{i}.weight",
                    "bias": f"deconv{i}.bias",
                    "stride": d.stride[0],
                    "padding": d.padding[0],
                    "output_padding": d.output_padding[0],
                }
            )
            if i < 4:
                out.append({"kind": "igdn", "gamma": f"igdn{i}.gamma", "beta": f"igdn{i}.beta"})
        return out


def plain_synthesis(model: Any) -> Any:
    """The plain synthesis of ``model.g_s`` (eval mode, no gradients)."""
    with torch.no_grad():
        plain = PlainSynthesis(model.g_s)
    plain.eval().requires_grad_(False)
    return plain


# -- pictures, symbols and check latents --------------------------------------------------------
