"""The one Decoder (service/decoding/decoder.py): every command goes through it, it keeps opened
sets by digest (nothing re-hashed unless a file changed), it decodes from several threads at
once, and its results carry what the CLI and the HTTP service print."""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any

import blake3
import numpy as np
import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.codec.envelope import parse
from wai_dispatch.codec.sets import SetFileMismatch, SetStore
from wai_dispatch.codec.sets import loaded as loaded_mod
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.dispatch import CPU_ONNX_RUNTIME, REFERENCE_OFFER, Code, Report
from wai_dispatch.service.decoding.decoder import Decoder

SAMPLE = Path(envelopes_dir()) / "bmshj2018-demo-q3.json"
SYMBOLS = "09c6186a09fd0e7b795a2c99c0594dbfaafadfc0f47af871a26e32bfdfbe5c44"
CLI = Path(__file__).resolve().parents[2] / "cli"


def count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    hashed: list[int] = []
    real = loaded_mod.hash_bytes

    def counting(data: bytes) -> str:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(loaded_mod, "hash_bytes", counting)
    return hashed


def test_decode_result(decoder: Decoder) -> None:
    result = decoder.decode(SAMPLE.read_bytes())
    assert result.symbols_digest == SYMBOLS
    assert result.capability == "wai.neural.bmshj2018" and result.latent_shape == (1, 192, 16, 16)
    assert result.rgb.shape == (256, 256, 3) and result.rgb.dtype == np.uint8
    assert result.rgb_digest == blake3.blake3(result.rgb.tobytes()).hexdigest()
    assert result.png()[:8] == b"\x89PNG\r\n\x1a\n"
    (report,) = result.reports
    assert report.ran is not None and report.ran.path == CPU_ONNX_RUNTIME
    Report.from_json(report.to_json())
    # the parsed form and a bare payload decode to the same
    envelope = parse(SAMPLE.read_bytes())
    assert decoder.decode(envelope).rgb_digest == result.rgb_digest
    bare = decoder.decode_payload(
        envelope.payload, capability=envelope.capability, set_digest=result.set_digest
    )
    assert bare.rgb_digest == result.rgb_digest and bare.symbols_digest == SYMBOLS


def test_a_set_is_hashed_once_not_per_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoder = Decoder.assemble(tmp_path / "data", REFERENCE_OFFER)
    hashed = count_hashes(monkeypatch)
    first = decoder.decode(SAMPLE.read_bytes())
    opened = len(hashed)
    assert opened >= 10 and sum(hashed) > 9_000_000  # every file of the set, once
    for _ in range(3):
        assert decoder.decode(SAMPLE.read_bytes()).rgb_digest == first.rgb_digest
    assert len(hashed) == opened  # nothing re-hashed


def test_a_prepared_envelope_reads_each_header_and_set_once(
    decoder: Decoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wai_dispatch.codec import payload as payload_mod
    from wai_dispatch.service.decoding import prepare as opened_mod

    expected = decoder.decode(SAMPLE.read_bytes())
    headers: list[int] = []
    real_header = payload_mod.read_header

    def counting_header(payload: bytes, **kw: Any) -> payload_mod.Header:
        headers.append(len(payload))
        return real_header(payload, **kw)

    monkeypatch.setattr(payload_mod, "read_header", counting_header)
    monkeypatch.setattr(opened_mod, "read_header", counting_header)
    lookups: list[str] = []

    def counting(name: str) -> Any:
        real = getattr(SetStore, name)

        def counted(self: SetStore, *args: Any, **kw: Any) -> Any:
            lookups.append(name)
            return real(self, *args, **kw)

        return counted

    for name in ("get", "default_for", "open", "resolve"):
        monkeypatch.setattr(SetStore, name, counting(name))
    prepared = decoder.prepare(parse(SAMPLE.read_bytes()))
    (part,) = prepared.parts
    assert part.header is not None and part.header.symbols == 192 * 16 * 16
    assert part.opened is not None and part.error is None
    assert len(headers) == 1 and lookups in ([], ["default_for", "get"])
    seen = (len(headers), len(lookups))
    result = decoder.decode(prepared)  # neither the header nor the set is read again
    assert (len(headers), len(lookups)) == seen
    assert (result.rgb_digest, result.symbols_digest) == (expected.rgb_digest, SYMBOLS)


def test_prepare_keeps_a_missing_set_for_the_decode(decoder: Decoder) -> None:
    from wai_dispatch.codec.sets import SetNotInstalled
    from wai_dispatch.service.decoding.results import NoPath

    envelope = parse(SAMPLE.read_bytes())
    absent = envelope.model_copy(update={"set": "0" * 64})
    prepared = decoder.prepare(absent)
    (part,) = prepared.parts
    assert part.header is not None and isinstance(part.error, SetNotInstalled)
    with pytest.raises(NoPath) as err:  # as an unprepared decode: no set, so no path
        decoder.decode(prepared)
    assert "not installed" in err.value.message


def test_a_set_file_changed_on_disk_is_noticed(tmp_path: Path) -> None:
    decoder = Decoder.assemble(tmp_path / "data", REFERENCE_OFFER)
    result = decoder.decode(SAMPLE.read_bytes())
    stored = decoder.set_store.root / result.set_digest / "cdfs_q3.json"
    stored.write_bytes(stored.read_bytes().replace(b"1", b"2", 1))
    with pytest.raises(SetFileMismatch, match=r"cdfs_q3\.json"):
        decoder.decode(SAMPLE.read_bytes())


def test_concurrent_decodes_share_one_opened_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoder = Decoder.assemble(tmp_path / "data", REFERENCE_OFFER)
    opens: list[str] = []
    real_open = SetStore.open

    def counting(self: SetStore, digest: str, **kw: object) -> object:
        opens.append(digest)
        return real_open(self, digest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SetStore, "open", counting)
    data = SAMPLE.read_bytes()
    digests: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(2):
                digests.append(decoder.decode(data).rgb_digest)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(digests) == 8 and len(set(digests)) == 1
    assert len(opens) == 1


def test_plan_and_paths(decoder: Decoder) -> None:
    answer = decoder.plan(CPU_ONNX_RUNTIME, latent_shape=(1, 192, 4, 4))
    assert answer.ok and answer.placement is not None and answer.placement.cpu > 0
    assert answer.capability == "wai.neural.bmshj2018"
    refused = decoder.plan("cpu/wai-ops/integer", latent_shape=(1, 192, 4, 4))
    assert refused.code is Code.ARITHMETIC_MISMATCH
    rows = {r.path: r for r in decoder.probe()}
    assert list(rows) == list(REFERENCE_OFFER) and rows[CPU_ONNX_RUNTIME].present


# --- the CLI holds no decoder assembly ------------------------------------------------------

ASSEMBLY = {
    "SetStore",
    "install_bundled",
    "known_adapters",
    "default_offer",
    "set_store_dir",
    "OnnxRuntimeAdapter",
    "decode_envelope",
    "entropy_stage",
    "choose",
}


@pytest.mark.parametrize("module", sorted(p.name for p in CLI.glob("*.py")))
def test_cli_modules_do_not_assemble_a_decoder(module: str) -> None:
    tree = ast.parse((CLI / module).read_text(encoding="utf-8"))
    names = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not names & ASSEMBLY, f"cli/{module} imports {sorted(names & ASSEMBLY)}"


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", str(SAMPLE), "--json"],
        ["demo", "--json"],
        ["plan", "--path", "cpu/onnx-runtime/float", "--latent-shape", "1,192,2,2"],
        ["paths"],
        ["sets", "list"],
        ["verify", "--json"],
        ["import-compressai", "in.json", "-o", "out.json"],
    ],
)
def test_every_command_decodes_through_decoder_assemble(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    made: list[Decoder] = []
    real = Decoder.assemble.__func__  # type: ignore[attr-defined]

    def recording(cls: type[Decoder], *args: object, **kw: object) -> Decoder:
        made.append(real(cls, *args, **kw))
        return made[-1]

    monkeypatch.setattr(Decoder, "assemble", classmethod(recording))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.json").write_text("{}")
    if argv[0] == "demo":
        argv = [*argv, "-o", str(tmp_path / "out")]
    main(argv if argv == ["paths"] else [*argv, "--data-dir", str(tmp_path / "data")])
    capsys.readouterr()
    assert len(made) == 1


def test_the_plan_logs_a_failing_node_count_with_its_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 29: the plan builder swallows nothing silently: an adapter whose node counts
    fail is logged with the path and the error (the placement was answered all the same)."""
    from wai_dispatch.dispatch import CPU_ONNX_RUNTIME
    from wai_dispatch.service.decoding import plan as plan_mod

    class Broken:
        def runtime_nodes(self, job: object) -> None:
            raise RuntimeError("graph optimiser gave up")

    with caplog.at_level("WARNING", "wai_dispatch.decode"):
        assert plan_mod._runtime_nodes(Broken(), None, CPU_ONNX_RUNTIME) is None  # type: ignore[arg-type]
    (record,) = [r for r in caplog.records if r.name == "wai_dispatch.decode"]
    assert record.getMessage() == (
        "path cpu/onnx-runtime/float: the runtime's node counts not read: "
        "RuntimeError: graph optimiser gave up"
    )
