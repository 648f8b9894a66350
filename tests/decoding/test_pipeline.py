"""The decode pipeline and the decode CLI on a small set the test writes itself (no torch):
real payloads, a real ONNX Runtime session, real reports."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wai_dispatch.cli.main import main
from wai_dispatch.codec import payload
from wai_dispatch.codec.envelope import Envelope, EnvelopePin, Fallback
from wai_dispatch.codec.sets import SetStore, write_manifest
from wai_dispatch.codec.tables import laplacian_tables
from wai_dispatch.dispatch import REFERENCE_OFFER, Code, Report, Tier, WaiError
from wai_dispatch.paths.registry import known_adapters
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.results import NoPath, to_rgb8
from wai_dispatch.tools.onnx_synthesis import onnx_program_facts, random_layers, synthesis_files

CHANNELS = 8
LINUX = sys.platform != "darwin"


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    root = tmp_path_factory.mktemp("tiny-set")
    model, weights = synthesis_files(random_layers(m=CHANNELS, n=8, seed=3))
    tables = laplacian_tables(CHANNELS, seed=5)
    rng = np.random.default_rng(11)
    symbols = np.rint(rng.laplace(0, 2, size=(1, CHANNELS, 3, 5))).astype(np.int32)
    files = {
        "decoder.onnx": model,
        "decoder.weights": weights,
        "cdfs.json": tables.to_json(),
        "payload.bin": payload.encode(symbols, tables),
        "payload.json": json.dumps({"symbols_digest": payload.symbols_digest(symbols)}).encode(),
        "wai-usage.json": b'{"licence": "Apache-2.0"}',
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    facts = {"tables": "cdfs.json", "payload": "payload.bin", **onnx_program_facts()}
    write_manifest(root, name="tiny", capability="wai.neural.bmshj2018", version="1", facts=facts)
    return root, symbols


@pytest.fixture
def store(tmp_path: Path, tiny_set: tuple[Path, np.ndarray]) -> SetStore:
    store = SetStore(tmp_path / "sets")
    store.install(tiny_set[0])
    return store


def _envelope(tiny_set: tuple[Path, np.ndarray], **kw: object) -> Envelope:
    return Envelope(
        capability="wai.neural.bmshj2018", payload=(tiny_set[0] / "payload.bin").read_bytes(), **kw
    )


def _decode(store: SetStore, envelope: Envelope):  # type: ignore[no-untyped-def]
    return Decoder(store, REFERENCE_OFFER, known_adapters()).decode(envelope)


def test_decodes_on_onnx_runtime_with_the_report(store: SetStore, tiny_set) -> None:  # type: ignore[no-untyped-def]
    result = _decode(store, _envelope(tiny_set))
    (report,) = result.reports
    assert report.needed is Tier.NONE
    assert report.ran is not None and str(report.ran.path) == "cpu/onnx-runtime/float"
    assert report.ran.tier is Tier.NONE
    assert report.ran.placement is not None and report.ran.placement.cpu > 0
    if LINUX:
        assert [(str(r.path), r.reason) for r in report.refused] == [
            ("npu/model-runtime/float", Code.UNIT_ABSENT)
        ]
    Report.from_json(report.to_json())  # the report validates
    assert result.rgb.shape == (3 * 16, 5 * 16, 3) and result.rgb.dtype == np.uint8
    assert result.part.symbols_digest == payload.symbols_digest(tiny_set[1])
    png = Image.open(io.BytesIO(result.png()))
    assert png.mode == "RGB" and np.array_equal(np.asarray(png), result.rgb)


@pytest.mark.parametrize(
    "kw",
    [
        {"intent": "replicate"},  # §2.2
        {
            "pins": (
                EnvelopePin(
                    capability="wai.neural.bmshj2018", set="0" * 64, tier="decode-equivalence"
                ),
            )
        },  # §2.3 (set checked later)
    ],
    ids=["intent-replicate", "pin-decode-equivalence"],
)
def test_decode_equivalence_leaves_bmshj2018_no_path(store: SetStore, tiny_set, kw) -> None:  # type: ignore[no-untyped-def]
    if "pins" in kw:  # the pin names the installed set, so the decode gets as far as §3
        digest = store.list()[0].digest
        kw = {"pins": (kw["pins"][0].model_copy(update={"set": digest}),)}
    with pytest.raises(NoPath) as info:
        _decode(store, _envelope(tiny_set, **kw))
    (report,) = info.value.reports
    assert report.needed is Tier.DECODE_EQUIVALENCE and report.ran is None
    assert [r.reason for r in report.refused] == [
        Code.TIER_REFUSED,
        Code.TIER_REFUSED,
        Code.ARITHMETIC_MISMATCH,
    ]
    # §3: the entropy stage ran all the same, and its symbols are the reference's.
    assert info.value.parts[0].symbols_digest == payload.symbols_digest(tiny_set[1])


def test_pin_over_a_set_not_installed_leaves_no_program(store: SetStore, tiny_set) -> None:  # type: ignore[no-untyped-def]
    pin = EnvelopePin(capability="wai.neural.bmshj2018", set="ab" * 32)
    with pytest.raises(NoPath, match="is not installed") as info:
        _decode(store, _envelope(tiny_set, pins=(pin,)))
    (report,) = info.value.reports
    reasons = {str(r.path): r.reason for r in report.refused}
    assert reasons["cpu/onnx-runtime/float"] is Code.PROGRAM_ABSENT  # §4.2: no set, no program


def test_pin_whose_bytes_changed_is_refused(store: SetStore, tiny_set) -> None:  # type: ignore[no-untyped-def]
    installed = store.list()[0]
    (installed.path / "decoder.weights").chmod(0o644)
    with (installed.path / "decoder.weights").open("r+b") as f:
        f.seek(100)
        f.write(b"\x7f")
    pin = EnvelopePin(capability="wai.neural.bmshj2018", set=installed.digest)
    with pytest.raises(WaiError) as info:
        _decode(store, _envelope(tiny_set, pins=(pin,)))
    assert info.value.code in {"set_damaged", "pin_mismatch"}  # installed, so a server fault
    assert "decoder.weights" in info.value.message


def test_fallback_runs_when_the_primary_has_no_path(store: SetStore, tiny_set) -> None:  # type: ignore[no-untyped-def]
    body = (tiny_set[0] / "payload.bin").read_bytes()
    envelope = Envelope(
        capability="wai.neural.int_synth",
        payload=b"\0",
        fallback=Fallback(capability="wai.neural.bmshj2018", payload=body),
    )
    result = _decode(store, envelope)
    primary, fallback = result.reports
    assert primary.capability == "wai.neural.int_synth" and primary.ran is None
    assert primary.needed is Tier.DECODE_EQUIVALENCE
    assert [r.reason for r in primary.refused] == [
        Code.TIER_REFUSED,
        Code.TIER_REFUSED,
        Code.PROGRAM_ABSENT,  # the interpreter is here; no int_synth set is installed
    ]
    assert fallback.capability == "wai.neural.bmshj2018" and fallback.ran is not None
    assert fallback.needed is Tier.NONE  # §2: the fallback reads no pin or tier of the primary's


@pytest.mark.parametrize("prepared", [False, True], ids=["decode", "prepare-then-decode"])
def test_a_fallback_with_a_bad_payload_keeps_the_primarys_no_path_report(  # type: ignore[no-untyped-def]
    store: SetStore, tiny_set, prepared: bool
) -> None:
    # §4: the primary is refused on every path; the fallback's payload ("AAAA" in base64) is
    # its own refusal beside the primary's report, not a bare payload_magic hiding it.
    envelope = _envelope(
        tiny_set,
        intent="replicate",
        fallback=Fallback(capability="wai.neural.int_synth", payload=b"\0\0\0"),
    )
    decoder = Decoder(store, REFERENCE_OFFER, known_adapters())
    with pytest.raises(NoPath) as info:
        decoder.decode(decoder.prepare(envelope) if prepared else envelope)
    (report,) = info.value.reports
    assert report.capability == "wai.neural.bmshj2018" and report.ran is None
    assert [(u.capability, u.code) for u in info.value.undecodable] == [
        ("wai.neural.int_synth", "payload_magic")
    ]
    assert info.value.message == (
        "no offered path decodes this envelope (wai.neural.bmshj2018, wai.neural.int_synth);"
        " fallback payload: bad magic (expected b'WAIP')"
    )


def test_a_primary_with_a_bad_payload_is_its_typed_error(store: SetStore, tiny_set) -> None:  # type: ignore[no-untyped-def]
    envelope = Envelope(capability="wai.neural.bmshj2018", payload=b"\0\0\0")
    with pytest.raises(WaiError) as info:
        _decode(store, envelope)
    assert info.value.code == "payload_magic"


def test_to_rgb8_clamps_scales_and_rounds_half_to_even() -> None:
    x = np.array([-0.5, 0.0, 0.5 / 255, 1.5 / 255, 2.5 / 255, 1.0, 7.0], dtype=np.float32)
    planes = np.stack([x, x, x])[None, :, None, :]
    assert to_rgb8(planes)[0, :, 0].tolist() == [0, 0, 0, 2, 2, 255, 255]


# --- the CLI ------------------------------------------------------------------------------


def test_cli_decode_writes_the_png_and_prints_the_report(
    tmp_path: Path, tiny_set, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    assert main(["sets", "install", str(tiny_set[0]), "--data-dir", str(data)]) == 0
    envelope = tmp_path / "e.cbor"
    digest = SetStore(data / "sets").list()
    tiny = next(s.digest for s in digest if s.name == "tiny")
    envelope.write_bytes(_envelope(tiny_set, set=tiny).to_cbor())
    capsys.readouterr()
    out = tmp_path / "x.png"
    assert main(["decode", str(envelope), "-o", str(out), "--data-dir", str(data), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["decoded"] is True and shown["output"] == str(out)
    assert Report.from_json(shown["reports"][0]).ran is not None
    with Image.open(out) as picture:
        assert picture.size == (5 * 16, 3 * 16)


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"{not json", "envelope_malformed"),
        (
            b'{"format": "wai-envelope/1", "capability": "wai.neural.bmshj2018", '
            b'"payload": "V0FJUA=="}',
            "payload_truncated",
        ),
        (
            b'{"format": "wai-envelope/1", "capability": "wai.nope", "payload": ""}',
            "unknown_capability",
        ),
    ],
)
def test_cli_decode_bad_input_is_one_line_with_a_code(
    tmp_path: Path, tiny_set, content: bytes, code: str, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    SetStore(data / "sets").install(tiny_set[0])
    envelope = tmp_path / "bad.json"
    envelope.write_bytes(content)
    assert main(["decode", str(envelope), "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"wai-dispatch: error: {code}: ") and "\n" not in err


def test_cli_decode_of_an_envelope_pinned_to_a_missing_set_says_so_once(
    tmp_path: Path, tiny_set, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    SetStore(data / "sets").install(tiny_set[0])
    envelope = tmp_path / "e.cbor"
    pin = EnvelopePin(capability="wai.neural.bmshj2018", set="ab" * 32)
    envelope.write_bytes(_envelope(tiny_set, pins=(pin,)).to_cbor())
    assert main(["decode", str(envelope), "--data-dir", str(data)]) == 1
    out = capsys.readouterr().out
    # the set's absence, once; not dispatch_program_absent for each path
    assert "dispatch_program_absent" not in out
    assert out.count("is not installed") == 1 and "set_not_installed" in out


def test_cli_decode_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(tmp_path / "nope.json"), "--data-dir", str(tmp_path)]) == 2
    assert "file_unreadable" in capsys.readouterr().err


def test_cli_verify_checks_symbols_and_psnr(
    tmp_path: Path, tiny_set, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    SetStore(data / "sets").install(tiny_set[0])
    assert main(["verify", "--data-dir", str(data), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ok"] is True  # the bundled set's payload too (§6.4)
    assert {r["name"] for r in shown["sets"]} >= {"tiny", "bmshj2018-demo-q3"}
    (result,) = [r for r in shown["sets"] if r["name"] == "tiny"]
    checks = {c["path"] if "path" in c else c["check"]: c for c in result["checks"]}
    assert checks["symbols_digest"]["ok"] is True
    assert checks["cpu/onnx-runtime/float"]["ok"] is True
    assert checks["cpu/onnx-runtime/float (as exported)"]["psnr_db"] is None or (
        checks["cpu/onnx-runtime/float (as exported)"]["psnr_db"] >= 40
    )


def test_cli_verify_of_a_set_of_an_unregistered_capability_names_the_code(
    tmp_path: Path, tiny_set, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "nope"
    shutil.copytree(tiny_set[0], folder)
    manifest = json.loads((folder / "set.json").read_text())
    facts = manifest["facts"]
    write_manifest(folder, name="nope", capability="wai.neural.nope", version="1", facts=facts)
    data = tmp_path / "data"
    SetStore(data / "sets").install(folder)
    capsys.readouterr()
    main(["verify", "--data-dir", str(data)])  # the bundled sets pass, so it may be ok
    out = capsys.readouterr().out
    assert (
        "  skipped: unknown_capability: this build does not know capability wai.neural.nope\n"
        in out
    )
