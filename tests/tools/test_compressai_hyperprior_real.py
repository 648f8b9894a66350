"""CompressAI's own hyperprior output, not a stand-in (issue 30, item 5; docs/interop.md, "The
hyperprior"): what ``ScaleHyperprior.compress()`` returns for a real picture (the demo
checkpoint, a crop of ``chelsea``) is refused by ``import-compressai`` with one line that says
why and to encode instead — both latents, or y's strings alone — and a ``WAIH`` payload whose y
was coded with the tables CompressAI's float ``h_s`` chose does not decode with the set's, and
its error names that cause."""

from __future__ import annotations

import json
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

from wai_dispatch.cli.main import main  # noqa: E402
from wai_dispatch.codec import hyperprior_payload as waih  # noqa: E402
from wai_dispatch.codec.compressai_rans import dump_compressed  # noqa: E402
from wai_dispatch.codec.errors import CodecError, Limits  # noqa: E402
from wai_dispatch.conformance import sets_dir  # noqa: E402
from wai_dispatch.service.decoding.hyperprior import HyperStage  # noqa: E402
from wai_dispatch.tools.hyperprior_encode import (  # noqa: E402
    DEMO_CHECKPOINT,
    HyperAnalysis,
    load_hyper_model,
    open_folder,
)

SIZE = 256


@pytest.fixture(scope="module")
def net() -> Any:
    return load_hyper_model(DEMO_CHECKPOINT, 3)


@pytest.fixture(scope="module")
def picture() -> np.ndarray:
    from skimage.data import chelsea

    return np.ascontiguousarray(chelsea()[:SIZE, :SIZE])


@pytest.fixture(scope="module")
def compressed(net: Any, picture: np.ndarray) -> dict[str, Any]:
    x = torch.from_numpy(picture).permute(2, 0, 1)[None].float().div(255.0)
    with torch.no_grad():
        out: dict[str, Any] = net.compress(x)
    return out


def _import(tmp_path: Path, data: bytes, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "in.json"
    path.write_bytes(data)
    argv = ["import-compressai", str(path), "-o", str(tmp_path / "e.json")]
    status = main([*argv, "--data-dir", str(tmp_path / "data")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "e.json").exists()
    return err


@pytest.mark.parametrize("model", ["bmshj2018-hyperprior", "my-model"])
def test_compress_output_is_refused_with_why_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], compressed: dict[str, Any], model: str
) -> None:
    assert len(compressed["strings"]) == 2  # y's strings, then z's
    data = dump_compressed(compressed["strings"], compressed["shape"], model=model, quality=3)
    err = _import(tmp_path, data, capsys)
    assert err.startswith("wai-dispatch: error: compressai_hyperprior_unsupported: ")
    assert "float hyper-synthesis" in err and "entropy-consistency" in err
    assert "wai-dispatch encode PICTURE --set DIGEST" in err


def test_y_strings_alone_name_the_hyperprior_when_they_do_not_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], compressed: dict[str, Any]
) -> None:
    """y's strings with no model named are read as a factorized prior's; they do not decode
    against its tables, and the message names the hyperprior as a likely case."""
    doc = json.loads(
        dump_compressed([compressed["strings"][0]], (SIZE // 16, SIZE // 16), model="", quality=3)
    )
    del doc["model"]
    err = _import(tmp_path, json.dumps(doc).encode(), capsys)
    assert err.startswith("wai-dispatch: error: compressai_stream_invalid: ")
    assert "ScaleHyperprior.compress()" in err and "encode the picture" in err


def test_a_payload_coded_with_the_float_h_s_tables_names_that_cause(
    net: Any, picture: np.ndarray
) -> None:
    files = open_folder(sets_dir() / "bmshj2018-hyperprior-int8-units-demo-q3")
    stage = HyperStage.of(files)
    assert stage is not None
    y, z_frac = HyperAnalysis(net).latents(picture)
    lo, hi = stage.program.input_range
    z = np.clip(np.rint(z_frac), lo, hi).astype(np.int32)
    medians = net.entropy_bottleneck._get_medians().detach()
    with torch.no_grad():
        scales = net.h_s(torch.from_numpy(z).float() + medians)
        theirs = net.gaussian_conditional.build_indexes(scales).numpy().astype(np.int32)
    ours = stage.indexes(z, Limits())
    # some positions differ (about a fifth with the int8-units h_s, by a step mostly)
    assert 0 < int((theirs != ours).sum()) < ours.size // 4
    symbols = np.rint(y).astype(np.int32)
    payload = waih.encode(z, symbols, theirs, stage.z_tables, stage.y_tables)
    with pytest.raises(CodecError) as err:
        stage.run(payload, limits=Limits())
    assert err.value.code == "payload_stream_invalid"
    assert (
        "float hyper-synthesis" in err.value.message and "wai-dispatch encode" in err.value.message
    )
