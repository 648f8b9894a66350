"""The bmshj2018 set writer (spec §6.1, §6.2): it reproduces the bundled demo set byte for byte,
refuses a plain synthesis that is not CompressAI's, and the set's WebNN form and ONNX program
compute the same synthesis."""

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

from wai_dispatch.codec import payload as codec_payload  # noqa: E402
from wai_dispatch.codec.sets import Manifest  # noqa: E402
from wai_dispatch.codec.tables import EntropyTables  # noqa: E402
from wai_dispatch.tools import coreml_program, webnn_form  # noqa: E402
from wai_dispatch.tools import wai_bmshj2018_npu_set as writer  # noqa: E402
from wai_dispatch.tools.bmshj2018_onnx import onnx_session  # noqa: E402
from wai_dispatch.tools.webnn_text import parse_text  # noqa: E402

BUNDLED = Path(__file__).resolve().parents[2] / "conformance" / "sets" / "bmshj2018-demo-q3"


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def bundled() -> dict[str, bytes]:
    return _files(BUNDLED)


@pytest.fixture(scope="module")
def payload_latent(bundled: dict[str, bytes]) -> np.ndarray[Any, Any]:
    tables = EntropyTables.from_json(bundled["cdfs_q3.json"])
    symbols = codec_payload.decode(bundled["payload.bin"], tables)
    assert (
        codec_payload.symbols_digest(symbols)
        == json.loads(bundled["payload.json"])["symbols_digest"]
    )
    return codec_payload.latent(symbols, tables)


@pytest.mark.slow
def test_writer_reproduces_the_bundled_set(tmp_path: Path, bundled: dict[str, bytes]) -> None:
    """Every file, set.json with it (so the set digest), is byte-identical; see
    docs/bmshj2018-set.md for what the bytes depend on (library versions, the CPU's float
    arithmetic in the encoder)."""
    out = writer.write_set(tmp_path / "set")
    written = _files(out)
    assert sorted(written) == sorted(bundled)
    differ = [name for name in bundled if written[name] != bundled[name]]
    assert not differ, (
        f"files differ from the bundled set: {differ} (payload.* and set.json alone: the "
        "encoder's float arithmetic on this CPU, see docs/bmshj2018-set.md, Determinism)"
    )
    digest = Manifest.from_bytes(bundled["set.json"]).digest
    assert Manifest.from_bytes(written["set.json"]).digest == digest
    assert not list(tmp_path.glob(".set.*")), "the temporary directory was left behind"


def test_perturbed_plain_synthesis_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = writer.plain_synthesis

    def perturbed(model: Any) -> Any:
        plain = original(model)
        with torch.no_grad():
            plain.igdn2.beta[5] += 1e-4
        return plain

    monkeypatch.setattr(writer, "plain_synthesis", perturbed)
    out = tmp_path / "refused"
    assert writer.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "differs from CompressAI's g_s" in err
    assert not out.exists()
    assert not list(tmp_path.iterdir()), "a refused set left files behind"


def test_webnn_form_matches_onnx_runtime(
    bundled: dict[str, bytes], payload_latent: np.ndarray[Any, Any]
) -> None:
    graph = json.loads(bundled["decoder.webnn.json"])
    manifest = json.loads(bundled["decoder.manifest.json"])
    blob = bundled["decoder.weights"]
    assert parse_text(bundled["decoder.webnn"]) == graph  # read back, not written again
    ops = {node["op"] for node in graph["nodes"]}
    assert ops <= {"convTranspose2d", "conv2d", "mul", "sqrt", "add", "slice"}
    for node in graph["nodes"]:
        if node["op"] == "convTranspose2d":
            assert node["options"]["padding"] == [0, 0, 0, 0]
            assert node["options"].get("outputPadding", [0, 0]) == [0, 0]

    consts = webnn_form.load_weights(graph, manifest, blob)
    webnn = webnn_form.evaluate(graph, consts, {"latent": payload_latent})["x_hat"]
    session = onnx_session(bundled["decoder.onnx"], blob)
    ort = session.run(["x_hat"], {"latent": payload_latent})[0]
    assert webnn.shape == ort.shape == (1, 3, 256, 256)
    assert float(np.max(np.abs(webnn - ort))) <= 1e-3


def test_onnx_program_is_plain(bundled: dict[str, bytes]) -> None:
    import onnx

    model = onnx.load_from_string(bundled["decoder.onnx"])
    ops = [node.op_type for node in model.graph.node]
    assert set(ops) <= {"ConvTranspose", "Conv", "Mul", "Sqrt", "Add"}
    assert len(ops) == 16
    assert [i.name for i in model.graph.input] == ["latent"]
    assert [o.name for o in model.graph.output] == ["x_hat"]
    # The weights are stored once: every initializer is a range of decoder.weights, the
    # ranges the WebNN manifest gives.
    tensors = json.loads(bundled["decoder.manifest.json"])["tensors"]
    for init in model.graph.initializer:
        assert init.data_location == onnx.TensorProto.EXTERNAL
        ext = {e.key: e.value for e in init.external_data}
        assert ext["location"] == "decoder.weights"
        assert int(ext["offset"]) == tensors[init.name]["byteOffset"]
        assert int(ext["length"]) == tensors[init.name]["byteLength"]


def test_set_facts_describe_the_files(bundled: dict[str, bytes]) -> None:
    manifest = Manifest.from_bytes(bundled["set.json"])
    facts = manifest.facts.to_json()
    assert manifest.capability == "wai.neural.bmshj2018"
    assert (facts["quality"], facts["N"], facts["M"], facts["upsampling"]) == (3, 128, 192, 16)
    core_ml = facts["programs"]["model-runtime"]
    assert core_ml["latent_shape"] == [1, 192, 16, 16]
    assert core_ml["operations"] == coreml_program.operation_count(bundled["decoder.mlmodel"])
    for program in facts["programs"].values():
        for key in ("file", "weights", "text", "manifest"):
            if key in program:
                assert program[key] in bundled
    assert facts["tables"] in bundled and facts["payload"] in bundled
