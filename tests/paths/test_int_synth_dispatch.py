"""wai.neural.int_synth through the decode pipeline (§3, §8): the reference offer refuses the
neural processor and ONNX Runtime by tier and decodes on cpu/wai-ops/integer at
decode-equivalence to the corpus hash; an envelope written for the retired set (the bundled set
before the int8-units one) decodes to its own pinned picture where that set is installed, and
is answered ``set_not_installed`` where it is not; the interpreter stays an arithmetic mismatch
for bmshj2018; a set whose program breaks the bound rule is refused before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from wai_dispatch.codec.envelope import Envelope, parse
from wai_dispatch.codec.sets import Manifest, SetStore, write_manifest
from wai_dispatch.conformance import neural_conformance_dir, retired_dir, sets_dir
from wai_dispatch.dispatch import REFERENCE_OFFER, Code, Report, Tier
from wai_dispatch.dispatch.offer import CPU_WAI_OPS
from wai_dispatch.paths.registry import known_adapters
from wai_dispatch.paths.waiops.errors import BoundExceeded
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import NoPath, SetMissing, rgb_digest, to_rgb8

INT_SET = sets_dir() / "int-synth-int8-units-demo-q3"
CORPUS = json.loads((neural_conformance_dir() / "corpus.json").read_bytes())
#: The set the bundled one replaced, its sample envelopes, and what they decode to with it (the
#: corpus's coffee-256x256 hash while it was the bundled set).
RETIRED = retired_dir() / "int-synth-demo-q3"
RETIRED_DIGEST = "63b8f98442a27214d66f7c6252d8545cc92ecad0dd9c4a3723041ed0a21ee3f4"
RETIRED_RGB8 = "82627b383d948cd0781efe7e0f299b3dbde9c24730cb3c3e20c03be58e388622"


@pytest.fixture
def store(tmp_path: Path) -> SetStore:
    store = SetStore(tmp_path / "sets")
    store.install(INT_SET)
    store.install(sets_dir() / "bmshj2018-demo-q3")
    return store


def _envelope(set_dir: Path, **kw: object) -> Envelope:
    manifest = Manifest.from_bytes((set_dir / "set.json").read_bytes())
    return Envelope(
        capability=manifest.capability,
        payload=(set_dir / "payload.bin").read_bytes(),
        set=manifest.digest,
        **kw,
    )


def _decode(store: SetStore, envelope: Envelope):  # type: ignore[no-untyped-def]
    return Decoder(store, REFERENCE_OFFER, known_adapters()).decode(envelope)


@pytest.mark.parametrize("intent", [None, "replicate"])
def test_int_synth_runs_on_the_interpreter_at_decode_equivalence(
    store: SetStore, intent: str | None
) -> None:
    result = _decode(store, _envelope(INT_SET, **({"intent": intent} if intent else {})))
    (report,) = result.reports
    assert report.needed is Tier.DECODE_EQUIVALENCE
    assert [(str(r.path), r.reason) for r in report.refused] == [
        ("npu/model-runtime/float", Code.TIER_REFUSED),
        ("cpu/onnx-runtime/float", Code.TIER_REFUSED),
    ]
    assert report.ran is not None and report.ran.path == CPU_WAI_OPS
    assert report.ran.tier is Tier.DECODE_EQUIVALENCE
    assert report.ran.placement is not None and report.ran.placement.to_json() == {
        "npu": 0,
        "gpu": 0,
        "cpu": 12,
        "unknown": 0,
    }
    Report.from_json(report.to_json())
    coffee = next(p for p in CORPUS["payloads"] if p["name"] == "coffee-256x256")
    assert result.part.symbols_digest == coffee["symbols_digest"]
    assert rgb_digest(result.rgb) == coffee["rgb8_blake3"]


@pytest.mark.parametrize(
    "sample",
    ["int-synth-demo-q3.json", "int-synth-demo-q3.cbor", "int-synth-demo-q3-replicate.json"],
)
def test_an_envelope_for_the_retired_set_decodes_where_it_is_installed(
    store: SetStore, sample: str
) -> None:
    envelope = parse((retired_dir() / sample).read_bytes())
    assert envelope.set == RETIRED_DIGEST
    with pytest.raises(SetMissing) as info:
        _decode(store, envelope)
    assert info.value.code == "set_not_installed" and RETIRED_DIGEST in info.value.message
    assert store.install(RETIRED).digest == RETIRED_DIGEST
    result = _decode(store, envelope)
    (report,) = result.reports
    assert report.ran is not None and report.ran.path == CPU_WAI_OPS
    coffee = next(p for p in CORPUS["payloads"] if p["name"] == "coffee-256x256")
    assert result.part.symbols_digest == coffee["symbols_digest"]
    assert rgb_digest(result.rgb) == RETIRED_RGB8 != coffee["rgb8_blake3"]


def test_the_interpreter_is_an_arithmetic_mismatch_for_bmshj2018(store: SetStore) -> None:
    with pytest.raises(NoPath) as info:
        _decode(store, _envelope(sets_dir() / "bmshj2018-demo-q3", intent="replicate"))
    (report,) = info.value.reports
    assert (str(report.refused[-1].path), report.refused[-1].reason) == (
        "cpu/wai-ops/integer",
        Code.ARITHMETIC_MISMATCH,
    )


def test_the_float_form_of_the_output_gives_back_the_integers() -> None:
    q = np.arange(256, dtype=np.int32).reshape(1, 1, 16, 16).repeat(3, axis=1)
    assert np.array_equal(
        to_rgb8(q.astype(np.float32) / np.float32(255.0)), q[0].transpose(1, 2, 0)
    )


def _bound_breaking_set(tmp_path: Path) -> Path:
    """The bundled integer set with deconv2's weights at ±32767: its accumulators break the
    bound rule."""
    from safetensors.numpy import load, save

    bad = tmp_path / "bad-set"
    shutil.copytree(INT_SET, bad)
    (bad / "set.json").unlink()
    tensors = dict(load((bad / "synthesis.safetensors").read_bytes()))
    tensors["deconv2.weight"] = (np.sign(tensors["deconv2.weight"]) * 32767).astype(np.int16)
    (bad / "synthesis.safetensors").write_bytes(save(tensors, metadata={"format": "wai-ops/1"}))
    facts = Manifest.from_bytes((INT_SET / "set.json").read_bytes()).facts.to_json()
    write_manifest(bad, name="bad", capability="wai.neural.int_synth", version="1", facts=facts)
    return bad


def test_a_set_that_breaks_the_bound_rule_is_refused_naming_the_operation(
    tmp_path: Path,
) -> None:
    bad = _bound_breaking_set(tmp_path)
    # refused as the set loads, before any path is asked: the operation and the bound named
    from wai_dispatch.service.decoding.decoder import Decoder

    decoder = Decoder.assemble(data_dir=tmp_path / "data", bundled=False)
    with pytest.raises(BoundExceeded, match=r"^deconv2: accumulator of channel \d+ reaches \d+"):
        decoder.opened.install(bad)
    assert decoder.set_store.list() == []  # nothing stays installed
    # a store that holds it anyway (installed without the check): a decode is refused with the
    # same typed error, and no path is tried
    store = SetStore(tmp_path / "sets")
    store.install(bad)
    with pytest.raises(BoundExceeded) as info:
        _decode(store, _envelope(bad))
    assert info.value.code == "waiops_bound_exceeded"
    assert str(info.value).startswith("deconv2: accumulator of channel")


@pytest.mark.slow
def test_verify_holds_an_integer_set_to_its_corpus_exactly(store: SetStore, tmp_path: Path) -> None:
    from wai_dispatch.codec.tables import EntropyTables
    from wai_dispatch.service.decoding.verify import verify_integer_set

    digest = CORPUS["set"]
    set_files = store.open(digest)
    tables = EntropyTables.from_json(set_files.read("cdfs_q3.json"))
    rows = verify_integer_set(set_files, tables, [neural_conformance_dir()])
    assert [r["check"] for r in rows] == ["program"] + ["corpus"] * len(CORPUS["payloads"])
    assert all(r["ok"] for r in rows)
    # a corpus whose golden hash differs fails, naming the payload
    changed = tmp_path / "corpus"
    shutil.copytree(neural_conformance_dir(), changed)
    doc = json.loads((changed / "corpus.json").read_bytes())
    doc["payloads"][2]["rgb8_blake3"] = "0" * 64
    (changed / "corpus.json").write_text(json.dumps(doc))
    rows = verify_integer_set(set_files, tables, [changed])
    assert [r["payload"] for r in rows if r["ok"] is False] == [doc["payloads"][2]["name"]]


def test_make_set_int_synth_refuses_an_unknown_float_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wai_dispatch.cli.main import main

    argv = ["make-set", "int-synth", "--out", str(tmp_path / "out"), "--from", "0000ffff"]
    assert main([*argv, "--data-dir", str(tmp_path / "data")]) == 2
    assert "set_not_installed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_sets_install_refuses_a_program_that_breaks_the_bound_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wai_dispatch.cli.main import main

    bad = _bound_breaking_set(tmp_path)
    data = tmp_path / "data"
    assert main(["sets", "install", str(bad), "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("wai-dispatch: error: waiops_bound_exceeded: deconv2: accumulator")
    assert main(["sets", "list", "--data-dir", str(data), "--json"]) == 0
    assert "bad" not in {row["name"] for row in json.loads(capsys.readouterr().out)}
