"""What an outside check found in the store and the decode around it (issue 7 §5), through the
command line a user runs: a damaged store is reported and repairable, a FIFO in the store never
blocks a command, an envelope that names another capability's set is refused, an unknown
primary falls back, every latent shape is bounded before anything is allocated, and a bad data
directory is one typed line."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.codec.envelope import Envelope, Fallback, parse
from wai_dispatch.codec.sets import Manifest, SetError, write_manifest
from wai_dispatch.conformance import envelopes_dir, sets_dir

BUNDLED = Path(sets_dir()) / "bmshj2018-demo-q3"
SAMPLE = Path(envelopes_dir()) / "bmshj2018-demo-q3.json"
CAP = "wai.neural.bmshj2018"


@contextlib.contextmanager
def no_hang(seconds: int = 60) -> Iterator[None]:
    """Fail (rather than block the suite) when a command waits on a FIFO."""

    def fire(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with no_hang():
        status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def bundled_digest() -> str:
    return Manifest.from_bytes((BUNDLED / "set.json").read_bytes()).digest


def custom_set(
    tmp_path: Path, *, name: str = "custom", capability: str = CAP, **facts: object
) -> Path:
    """A copy of the bundled set under another name (so another digest), facts changed."""
    root = tmp_path / name
    shutil.copytree(BUNDLED, root)
    (root / "set.json").unlink()
    doc = json.loads((BUNDLED / "set.json").read_bytes())["facts"]
    doc.update(facts)
    write_manifest(root, name=name, capability=capability, version="1", facts=doc)
    return root


def install(capsys: pytest.CaptureFixture[str], data: Path, source: Path) -> str:
    status, out, err = cli(capsys, "sets", "install", source, "--data-dir", data, "--json")
    assert status == 0, err
    return str(json.loads(out)["digest"])


def place(capsys: pytest.CaptureFixture[str], data: Path, source: Path) -> str:
    """Put a set of a capability this build does not know into the data directory's store, as
    another wai-dispatch version (or a copied folder) would: ``sets install`` refuses it
    (``unknown_capability``), so it goes into the set store directly."""
    from wai_dispatch.codec.layout import set_store_dir
    from wai_dispatch.codec.sets import SetStore

    cli(capsys, "sets", "list", "--data-dir", data)  # the data directory and its bundled sets
    return SetStore(set_store_dir(data)).install(source).digest


# --- a damaged store ------------------------------------------------------------------------


def test_install_repairs_a_damaged_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    digest = install(capsys, data, BUNDLED)
    stored = data / "sets" / digest / "payload.bin"
    stored.write_bytes(bytes(len(stored.read_bytes())))  # same size, other bytes
    status, out, _ = cli(capsys, "sets", "verify", digest, "--data-dir", data, "--json")
    assert status == 1 and json.loads(out)["problems"][0]["code"] == "set_file_mismatch"
    assert install(capsys, data, BUNDLED) == digest  # not a no-op: the set is re-verified
    status, out, _ = cli(capsys, "sets", "verify", digest, "--data-dir", data, "--json")
    assert status == 0 and json.loads(out)["ok"] is True
    # no temporary folder left behind (the set cache's lock file, .sync.lock, stays by design)
    assert not [p for p in (data / "sets").iterdir() if p.name.startswith(".install")]
    assert {p.name for p in (data / "sets").iterdir() if p.name.startswith(".")} <= {".sync.lock"}


def test_list_reports_a_garbled_manifest_and_keeps_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    other = install(capsys, data, custom_set(tmp_path))
    (data / "sets" / other / "set.json").write_bytes(b'{"format": "wai-set/1", garbled')
    status, out, err = cli(capsys, "sets", "list", "--data-dir", data, "--json")
    assert status == 0, err
    rows = {r["digest"]: r for r in json.loads(out)}
    assert rows[other]["damaged"]["code"] == "set_manifest_invalid"
    assert rows[bundled_digest()]["damaged"] is None  # the bundled set is listed as before


@pytest.mark.parametrize("damage", ["garble-manifest", "replace-file", "fifo", "remove-file"])
def test_a_damaged_bundled_set_is_repaired_before_a_decode(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    digest = install(capsys, data, BUNDLED)
    folder = data / "sets" / digest
    if damage == "garble-manifest":
        (folder / "set.json").write_bytes(b"\xff\xfe not json")
    elif damage == "replace-file":
        (folder / "cdfs_q3.json").write_bytes(b"{}")
    elif damage == "fifo":
        (folder / "payload.bin").unlink()
        os.mkfifo(folder / "payload.bin")
    else:
        (folder / "decoder.onnx").unlink()
    status, out, err = cli(
        capsys, "decode", SAMPLE, "-o", tmp_path / "out.png", "--data-dir", data, "--json"
    )
    assert status == 0, err
    assert json.loads(out)["set"] == digest
    status, _, _ = cli(capsys, "sets", "verify", digest, "--data-dir", data)
    assert status == 0


def test_decode_refuses_a_tampered_set_and_verify_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    digest = install(capsys, data, custom_set(tmp_path))
    folder = data / "sets" / digest
    (folder / "payload.bin").unlink()
    os.mkfifo(folder / "payload.bin")  # a FIFO swapped in: nothing may block on it
    body = parse(SAMPLE.read_bytes()).payload
    envelope = tmp_path / "env.json"
    envelope.write_bytes(Envelope(capability=CAP, payload=body, set=digest).to_json())
    status, _, err = cli(capsys, "decode", envelope, "-o", tmp_path / "o.png", "--data-dir", data)
    assert status == 2 and "set_unsafe_entry" in err and "payload.bin" in err
    assert len(err.strip().splitlines()) == 1
    status, out, err = cli(capsys, "verify", "--data-dir", data, "--json")
    assert status == 1
    sets = {s["set"]: s for s in json.loads(out)["sets"]}
    assert [p["code"] for p in sets[digest]["damaged"]] == ["set_unsafe_entry"]
    assert sets[bundled_digest()]["checks"][0]["ok"] is True  # the others are checked
    status, out, _ = cli(capsys, "sets", "verify", digest, "--data-dir", data, "--json")
    assert status == 1 and json.loads(out)["problems"][0]["file"] == "payload.bin"
    # The same copy installed again replaces the tampered one.
    assert install(capsys, data, custom_set(tmp_path / "again")) == digest
    status, _, err = cli(capsys, "decode", envelope, "-o", tmp_path / "o.png", "--data-dir", data)
    assert status == 0, err


def test_verify_skips_a_set_of_an_unknown_capability(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    other = place(capsys, data, custom_set(tmp_path, capability="wai.neural.not-here"))
    status, out, err = cli(capsys, "verify", "--data-dir", data, "--json")
    assert status == 0, err
    sets = {s["set"]: s for s in json.loads(out)["sets"]}
    assert "wai.neural.not-here" in sets[other]["skipped"]
    assert all(c["ok"] is not False for c in sets[bundled_digest()]["checks"])


# --- what an envelope may name --------------------------------------------------------------


@pytest.mark.parametrize("capability", ["wai.neural.not-here", "wai.neural.int_synth"])
def test_a_set_of_another_capability_is_refused(
    capability: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    known = capability == "wai.neural.int_synth"
    put = install if known else place
    other = put(capsys, data, custom_set(tmp_path, capability=capability))
    body = parse(SAMPLE.read_bytes()).payload
    envelope = tmp_path / "env.json"
    envelope.write_bytes(Envelope(capability=CAP, payload=body, set=other).to_json())
    status, _, err = cli(capsys, "decode", envelope, "-o", tmp_path / "o.png", "--data-dir", data)
    assert status == 2 and "set_capability_mismatch" in err
    assert not (tmp_path / "o.png").exists()


def test_an_unknown_primary_falls_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = parse(SAMPLE.read_bytes())
    envelope = tmp_path / "env.json"
    envelope.write_bytes(
        Envelope(
            capability="wai.neural.from-the-future",
            payload=b"\x00" * 16,
            fallback=Fallback(capability=CAP, payload=sample.payload),
        ).to_json()
    )
    data = tmp_path / "data"
    args = ("decode", envelope, "-o", tmp_path / "o.png", "--data-dir", data, "--json")
    status, out, err = cli(capsys, *args)
    assert status == 0, err
    outcome = json.loads(out)
    assert outcome["decoded"] is True
    assert [r["capability"] for r in outcome["reports"]] == [CAP]
    assert outcome["undecodable"][0]["capability"] == "wai.neural.from-the-future"
    assert outcome["undecodable"][0]["code"] == "unknown_capability"
    assert (tmp_path / "o.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, out, _ = cli(capsys, *args[:-1])  # the text says it too
    assert "wai.neural.from-the-future: not decodable here: unknown_capability" in out


# --- shapes are bounded before anything is allocated ---------------------------------------


@pytest.mark.parametrize(
    ("shape", "code"),
    [
        ("1,192,4096,4096", "payload_shape_over_limits"),
        ("1,1000000000,1000,1000", "payload_shape_over_limits"),
        ("1,192,-1,4", "invalid_argument"),
        ("1,192,0,4", "invalid_argument"),
        ("1,192,4", "invalid_argument"),
    ],
)
def test_plan_bounds_the_latent_shape(
    shape: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("plan", "--path", "cpu/onnx-runtime/float", "--latent-shape", shape)
    status, _, err = cli(capsys, *argv, "--data-dir", tmp_path / "data")
    assert status == 2 and f"error: {code}:" in err
    assert len(err.strip().splitlines()) == 1


# --- the data directory ---------------------------------------------------------------------


@pytest.mark.parametrize("command", [("sets", "list"), ("verify",), ("plan",)])
def test_an_empty_data_dir_is_refused(
    command: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    status, _, err = cli(capsys, *command, "--data-dir", "")
    assert status == 2 and "error: settings_invalid: data_dir (WAI_DATA_DIR) = '':" in err
    assert list(tmp_path.iterdir()) == []  # no store made in the working directory


@pytest.mark.parametrize("where", ["file", "below-a-file", "unreadable"])
def test_a_bad_data_dir_is_one_typed_line(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    data = {"file": blocker, "below-a-file": blocker / "data", "unreadable": tmp_path / "locked"}[
        where
    ]
    if where == "unreadable":
        if os.geteuid() == 0:
            data = Path("/proc/1/root-is-not-a-folder/data")
        else:
            data.mkdir(mode=0)
    status, _, err = cli(capsys, "sets", "list", "--data-dir", data)
    assert status == 2 and "error: data_dir_invalid:" in err
    assert len(err.strip().splitlines()) == 1
    status, _, err = cli(capsys, "decode", SAMPLE, "-o", tmp_path / "o.png", "--data-dir", data)
    assert status == 2 and "error: data_dir_invalid:" in err


# --- import-compressai: the set must be the one the bitstream was coded with ----------------


def compressed(tmp_path: Path, *, quality: int = 3, shape: tuple[int, int] = (16, 16)) -> Path:
    from wai_dispatch.codec.compressai_rans import dump_compressed

    path = tmp_path / f"q{quality}-{shape[0]}.compressai.json"
    string = b"\x00" * 8  # a string that does not decode against any set's tables
    path.write_bytes(
        dump_compressed([[string]], shape, model="bmshj2018-factorized", quality=quality)
    )
    return path


def test_import_checks_the_quality_against_the_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    args = ("-o", tmp_path / "env.json", "--data-dir", data)
    status, _, err = cli(capsys, "import-compressai", compressed(tmp_path, quality=5), *args)
    assert status == 2 and "error: set_facts_mismatch:" in err and "quality 5" in err
    status, _, err = cli(
        capsys,
        "import-compressai",
        compressed(tmp_path, quality=5),
        "--set",
        bundled_digest(),
        *args,
    )
    assert status == 2 and "error: set_facts_mismatch:" in err
    assert not (tmp_path / "env.json").exists()


def test_import_names_the_set_when_the_string_does_not_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("-o", tmp_path / "env.json", "--data-dir", tmp_path / "data")
    status, _, err = cli(capsys, "import-compressai", compressed(tmp_path), *args)
    assert status == 2 and "error: compressai_stream_invalid:" in err
    assert "may not be the one" in err and "bmshj2018-demo-q3" in err
    assert "--update-quantiles" in err and "--set" in err  # the two fixes, named
    assert len(err.strip().splitlines()) == 1


def test_import_without_set_prefers_the_users_set_of_the_files_model_and_quality(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled demo set and the user's both are bmshj2018-factorized at quality 3: the
    user's is taken (issue 21: the bundled default was), and the import says which and why."""
    from wai_dispatch.service.decoding.compressai import _matching_set
    from wai_dispatch.service.decoding.decoder import Decoder

    data = tmp_path / "data"
    mine = install(capsys, data, custom_set(tmp_path, name="mine-q3", quality=3))
    args = ("-o", tmp_path / "env.json", "--data-dir", data)
    status, _, err = cli(capsys, "import-compressai", compressed(tmp_path), *args)
    assert status == 2 and "error: compressai_stream_invalid:" in err
    assert "set mine-q3" in err and "bmshj2018-demo-q3" not in err
    meta = {"model": "bmshj2018-factorized", "quality": 3}
    decoder = Decoder.assemble(data_dir=data)
    bundled = {s.digest for s in decoder.bundled.installed}
    files, why = _matching_set(decoder.opened, bundled, CAP, meta)
    assert files.digest == mine
    assert why == f"the one installed set of {CAP} for bmshj2018-factorized, quality 3"
    install(capsys, data, custom_set(tmp_path, name="other-q3", quality=3))
    with pytest.raises(SetError, match="several installed sets fit the file"):
        _matching_set(decoder.opened, bundled, CAP, meta)


@pytest.mark.parametrize("quality", ['"3"', "3.0", "true", "[3]"])
def test_a_quality_that_is_not_an_integer_is_a_format_error(
    quality: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21: the string "3" was read as a quality and gave set_facts_mismatch."""
    source = compressed(tmp_path)
    source.write_text(source.read_text().replace('"quality": 3', f'"quality": {quality}'))
    args = ("-o", tmp_path / "env.json", "--data-dir", tmp_path / "data")
    status, _, err = cli(capsys, "import-compressai", source, *args)
    assert (
        status == 2
        and "error: compressai_stream_invalid: compressed file: quality is an integer" in err
    )
    assert not (tmp_path / "env.json").exists()


def test_import_without_set_takes_the_installed_set_of_the_files_quality(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    install(capsys, data, custom_set(tmp_path, name="mine-q5", quality=5))
    args = ("-o", tmp_path / "env.json", "--data-dir", data)
    status, _, err = cli(capsys, "import-compressai", compressed(tmp_path, quality=5), *args)
    assert status == 2 and "mine-q5" in err  # the user's set, not the bundled demo set


def test_import_bounds_the_shape_before_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("-o", tmp_path / "env.json", "--data-dir", tmp_path / "data")
    big = compressed(tmp_path, shape=(4096, 4096))
    status, _, err = cli(capsys, "import-compressai", big, *args)
    assert status == 2 and "error: payload_shape_over_limits:" in err


@pytest.mark.parametrize("info", [b"not json", b"[]", b'{"latent_shape": [1]}'])
def test_verify_reports_a_set_whose_payload_info_does_not_read(
    info: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = custom_set(tmp_path)
    (source / "payload.json").write_bytes(info)
    doc = json.loads((source / "set.json").read_bytes())
    (source / "set.json").unlink()
    write_manifest(source, name="custom", capability=CAP, version="1", facts=doc["facts"])
    data = tmp_path / "data"
    digest = install(capsys, data, source)
    status, out, err = cli(capsys, "verify", "--data-dir", data, "--json")
    assert status == 1 and "Traceback" not in err
    sets = {s["set"]: s for s in json.loads(out)["sets"]}
    assert sets[digest]["checks"][0]["check"] == "payload"
    assert sets[digest]["checks"][0]["ok"] is False
    assert sets[bundled_digest()]["checks"][0]["ok"] is True
