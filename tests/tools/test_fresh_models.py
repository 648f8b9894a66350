"""Any CompressAI checkpoint in (issue 30): a freshly initialised ``FactorizedPrior`` and
``ScaleHyperprior`` (``update(force=True)``, never trained: the three inverse GDNs hold
identical β and γ, which ``torch.onnx.export`` merges into one initializer) are written as sets,
of the widths their state dicts hold (small N and M here, so it runs in seconds), and each set
decodes its own encode through the real decoder."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _thirdparty import import_or_skip

pytestmark = pytest.mark.tools

import_or_skip(
    lambda: __import__("compressai"),
    "torch",
    "compressai",
    reason="the tools extra (torch, CompressAI)",
)
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from wai_dispatch.codec.envelope import parse  # noqa: E402
from wai_dispatch.codec.sets import Manifest  # noqa: E402
from wai_dispatch.tools._compressai import factorized_prior, scale_hyperprior  # noqa: E402
from wai_dispatch.tools.encoder import encode  # noqa: E402

N, M = 16, 24


def _fresh(kind: str, path: Path) -> Path:
    torch.manual_seed(30)
    net = factorized_prior(N, M) if kind == "factorized" else scale_hyperprior(N, M)
    net.update(force=True)
    torch.save(net.state_dict(), path)
    return path


def _png(height: int, width: int) -> bytes:
    rgb = np.random.default_rng(30).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def _round_trip(decoder: Any, folder: Path, checkpoint: Path) -> tuple[Any, Any, Manifest]:
    manifest = Manifest.from_bytes((folder / "set.json").read_bytes())
    assert (manifest.facts.model_extra or {})["N"] == N
    assert manifest.facts.latent_channels == M
    decoder.set_store.install(folder)
    result = encode(decoder, _png(64, 64), set_digest=manifest.digest, checkpoint=checkpoint)
    decoded = decoder.decode(parse(result.envelope.to_cbor()))
    return result, decoded, manifest


@pytest.mark.slow
def test_a_fresh_factorized_prior_is_written_and_decodes_its_encode(
    tmp_path: Path, decoder: Any
) -> None:
    from wai_dispatch.tools import wai_bmshj2018_npu_set as writer

    checkpoint = _fresh("factorized", tmp_path / "fresh.pt")
    out = writer.write_set(tmp_path / "set", checkpoint=checkpoint, coreml=False)
    result, decoded, manifest = _round_trip(decoder, out, checkpoint)
    assert manifest.capability == "wai.neural.bmshj2018"
    assert result.latent_shape == (1, M, 4, 4)
    assert decoded.symbols_digest == result.symbols_digest
    assert decoded.reports[-1].ran is not None
    assert (decoded.width, decoded.height) == (64, 64)


@pytest.mark.slow
def test_a_fresh_scale_hyperprior_is_written_and_decodes_its_encode(
    tmp_path: Path, decoder: Any
) -> None:
    from wai_dispatch.tools import wai_bmshj2018_hyperprior_set as writer

    checkpoint = _fresh("hyperprior", tmp_path / "fresh.pt")
    out = writer.write_set(tmp_path / "set", checkpoint=checkpoint, coreml=False)
    result, decoded, manifest = _round_trip(decoder, out, checkpoint)
    assert manifest.capability == "wai.neural.bmshj2018_hyperprior"
    assert result.latent_shape == (1, M, 4, 4)
    assert decoded.symbols_digest == result.symbols_digest
    ran = decoded.reports[-1].ran
    assert ran is not None and str(ran.tier) == "entropy-consistency"
    assert (decoded.width, decoded.height) == (64, 64)


def test_merged_initializers_are_restored_under_their_own_names() -> None:
    """The export's ``Identity`` nodes for merged β and γ become initializers again."""
    from wai_dispatch.tools.bmshj2018_model import plain_synthesis
    from wai_dispatch.tools.bmshj2018_onnx import export_onnx, weights_blob

    torch.manual_seed(30)
    net = factorized_prior(N, M)
    net.update(force=True)
    plain = plain_synthesis(net.eval())
    blob, manifest = weights_blob(plain)
    import onnx

    model = onnx.load_from_string(export_onnx(plain, manifest, blob, M))
    assert {i.name for i in model.graph.initializer} == set(manifest["tensors"])
    assert "Identity" not in {node.op_type for node in model.graph.node}
    assert len(model.graph.node) == 16
