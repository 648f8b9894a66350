"""Parameter sets and the store (docs/sets.md): the manifest and digest, installs that check
every byte and leave nothing behind when they fail, opening a set for a decode, the CLI."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import blake3
import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.codec.layout import set_store_dir
from wai_dispatch.codec.sets import (
    LoadedSet,
    Manifest,
    SetLimits,
    SetStore,
    canonical_json,
    install_bundled,
    write_manifest,
)
from wai_dispatch.codec.sets import errors as set_errors
from wai_dispatch.dispatch import Pin
from wai_dispatch.service.settings import load

CAP = "wai.neural.bmshj2018"
FILES = {
    "wai-usage.json": b'{"licence": "CC0-1.0"}',
    "decoder.onnx": bytes(range(256)) * 3,
    "tables/cdfs_q3.json": b'{"cdfs": [[0, 65536]]}',
}


def make_set(directory: Path, files: dict[str, bytes] = FILES, **kw: object) -> Manifest:
    for name, data in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)
    args: dict[str, object] = {
        "name": "demo",
        "capability": CAP,
        "version": "1",
        "facts": {"quality": 3, "latent_channels": 192, "tables": "tables/cdfs_q3.json"},
    }
    args.update(kw)
    return write_manifest(directory, **args)  # type: ignore[arg-type]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    make_set(src)
    return src


@pytest.fixture
def store(tmp_path: Path) -> SetStore:
    return SetStore(tmp_path / "data" / "sets")


def store_entries(store: SetStore) -> list[str]:
    return sorted(os.listdir(store.root)) if store.root.exists() else []


# --- manifest -------------------------------------------------------------------------------


def test_manifest_is_canonical_and_its_digest_is_blake3_of_it(source: Path) -> None:
    data = (source / "set.json").read_bytes()
    manifest = Manifest.from_bytes(data)
    assert data == canonical_json(json.loads(data))
    assert manifest.digest == blake3.blake3(data).hexdigest()
    assert set(manifest.files) == set(FILES)
    assert manifest.files["decoder.onnx"].size == 768
    assert manifest.files["decoder.onnx"].blake3 == blake3.blake3(FILES["decoder.onnx"]).hexdigest()


def test_write_manifest_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert make_set(a).digest == make_set(b).digest
    assert (a / "set.json").read_bytes() == (b / "set.json").read_bytes()
    assert make_set(a).digest == make_set(a).digest  # set.json itself is not a set file
    assert make_set(a, version="2").digest != make_set(b).digest


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"usage": "licence.txt"}, "usage"),
        ({"format": "wai-set/2"}, "format"),
        ({"files": {"../x": {"blake3": "0" * 64, "size": 1}}}, "file name"),
        ({"files": {"a": {"blake3": "0" * 63, "size": 1}, "wai-usage.json": None}}, "files"),
        ({"extra": 1}, "extra"),
        ({"facts": {"q": float("inf")}}, "JSON|number"),
    ],
)
def test_bad_manifests(source: Path, change: dict[str, object], match: str) -> None:
    obj = json.loads((source / "set.json").read_bytes())
    obj.update(change)
    with pytest.raises(set_errors.ManifestInvalid, match=match):
        Manifest.from_bytes(json.dumps(obj).encode())


# --- install, list, verify, remove ----------------------------------------------------------


def test_install_list_verify_open_remove(source: Path, store: SetStore) -> None:
    digest = Manifest.from_bytes((source / "set.json").read_bytes()).digest
    installed = store.install(source)
    assert installed.digest == digest and installed.name == "demo"
    assert store_entries(store) == [digest]
    assert [s.digest for s in store.list()] == [digest]
    assert store.verify(digest).ok
    assert store.install(source) == installed  # a no-op
    loaded = store.open(digest)
    assert {n: loaded.read(n) for n in loaded.names} == FILES
    assert loaded.facts.quality == 3 and loaded.facts.tables == "tables/cdfs_q3.json"
    assert store.default_for(CAP).digest == digest
    assert store.resolve(digest[:8]) == digest
    store.remove(digest)
    assert store.list() == [] and store_entries(store) == []
    with pytest.raises(set_errors.SetNotInstalled):
        store.open(digest)


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip", "tar-with-folder", "zip-with-folder"])
def test_install_from_archives(source: Path, store: SetStore, tmp_path: Path, kind: str) -> None:
    archive = tmp_path / f"set.{kind.split('-')[0]}"
    prefix = "demo-set/" if kind.endswith("folder") else ""
    names = ["set.json", *FILES]
    if kind.startswith("tar"):
        with tarfile.open(archive, "w:gz" if kind == "tar.gz" else "w") as tf:
            for name in names:
                tf.add(source / name, arcname=prefix + name)
    else:
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for name in names:
                zf.write(source / name, prefix + name)
    installed = store.install(archive)
    assert store.verify(installed.digest).ok
    assert store_entries(store) == [installed.digest]


def byte_positions() -> list[tuple[str, int]]:
    cases = []
    for name, data in FILES.items():
        for pos in sorted({0, 1, len(data) // 2, len(data) - 1}):
            cases.append((name, pos))
    return cases


@pytest.mark.parametrize(("name", "pos"), byte_positions())
def test_any_changed_byte_refuses_the_set(
    source: Path, store: SetStore, tmp_path: Path, name: str, pos: int
) -> None:
    path = source / name
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(set_errors.SetFileMismatch, match=name):
        store.install(source)
    assert store_entries(store) == []

    # The same change made after installing: verify names the file, open refuses it.
    path.write_bytes(FILES[name])
    installed = store.install(source)
    (installed.path / name).write_bytes(bytes(data))
    result = store.verify(installed.digest)
    assert [(p.name, p.code) for p in result.problems] == [(name, "set_file_mismatch")]
    with pytest.raises(set_errors.SetFileMismatch, match=name):
        store.open(installed.digest)


@pytest.mark.parametrize("how", ["longer", "shorter", "manifest"])
def test_size_and_manifest_changes_refuse_the_set(source: Path, store: SetStore, how: str) -> None:
    installed = store.install(source)
    if how == "longer":
        (installed.path / "decoder.onnx").write_bytes(FILES["decoder.onnx"] + b"\0")
    elif how == "shorter":
        (installed.path / "decoder.onnx").write_bytes(FILES["decoder.onnx"][:-1])
    else:  # a manifest edited to match a changed file no longer hashes to the folder's digest
        obj = json.loads((installed.path / "set.json").read_bytes())
        obj["version"] = "2"
        (installed.path / "set.json").write_bytes(canonical_json(obj))
    assert not store.verify(installed.digest).ok
    with pytest.raises(set_errors.SetFileMismatch):
        store.open(installed.digest)


def test_missing_and_extra_files(source: Path, store: SetStore) -> None:
    (source / "extra.bin").write_bytes(b"x")
    with pytest.raises(set_errors.SetFileUnexpected, match=r"extra\.bin"):
        store.install(source)
    (source / "extra.bin").unlink()
    (source / "decoder.onnx").unlink()
    with pytest.raises(set_errors.SetFileMissing, match=r"decoder\.onnx"):
        store.install(source)
    assert store_entries(store) == []
    (source / "decoder.onnx").write_bytes(FILES["decoder.onnx"])
    installed = store.install(source)
    (installed.path / "decoder.onnx").unlink()
    (installed.path / "stray").write_bytes(b"")
    codes = {(p.name, p.code) for p in store.verify(installed.digest).problems}
    assert codes == {("decoder.onnx", "set_file_missing"), ("stray", "set_file_unexpected")}
    with pytest.raises(set_errors.SetDamaged, match=r"decoder\.onnx") as err:
        store.open(installed.digest)  # installed, then damaged: the store's fault
    assert err.value.code == "set_damaged"


def test_links_and_devices_in_a_folder_are_refused(source: Path, store: SetStore) -> None:
    (source / "decoder.onnx").unlink()
    (source / "decoder.onnx").symlink_to(source / "wai-usage.json")
    with pytest.raises(set_errors.SetUnsafeEntry, match="link"):
        store.install(source)
    (source / "decoder.onnx").unlink()
    os.mkfifo(source / "decoder.onnx")
    with pytest.raises(set_errors.SetUnsafeEntry):
        store.install(source)
    assert store_entries(store) == []


def tar_with(source: Path, archive: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(archive, "w") as tf:
        for name in ["set.json", *FILES]:
            tf.add(source / name, arcname=name)
        tf.addfile(member, io.BytesIO(data) if data else None)
    return archive


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    return info


@pytest.mark.parametrize(
    ("member", "code"),
    [
        (_member("../evil", size=1), "set_unsafe_entry"),
        (_member("a/../../evil", size=1), "set_unsafe_entry"),
        (_member("/etc/evil", size=1), "set_unsafe_entry"),
        (_member("c:evil", size=1), "set_unsafe_entry"),
        (_member("a\\..\\evil", size=1), "set_unsafe_entry"),
        (_member("link", tarfile.SYMTYPE, link="/etc/passwd"), "set_unsafe_entry"),
        (_member("hard", tarfile.LNKTYPE, link="decoder.onnx"), "set_unsafe_entry"),
        (_member("dev", tarfile.CHRTYPE), "set_unsafe_entry"),
        (_member("blk", tarfile.BLKTYPE), "set_unsafe_entry"),
        (_member("fifo", tarfile.FIFOTYPE), "set_unsafe_entry"),
        (_member("extra.bin", size=1), "set_file_unexpected"),
        (_member(".hidden", size=1), "set_file_unexpected"),
        (_member("decoder.onnx", size=1), "set_archive_invalid"),  # twice
    ],
    ids=lambda v: v.name if isinstance(v, tarfile.TarInfo) else v,
)
def test_unsafe_tar_members_are_refused(
    source: Path, store: SetStore, tmp_path: Path, member: tarfile.TarInfo, code: str
) -> None:
    archive = tar_with(source, tmp_path / "bad.tar", member, b"x" * member.size)
    with pytest.raises(set_errors.SetError) as info:
        store.install(archive)
    assert info.value.code == code
    assert store_entries(store) == []
    assert not (tmp_path / "evil").exists() and not Path("/etc/evil").exists()


def test_zip_symlink_and_traversal_refused(source: Path, store: SetStore, tmp_path: Path) -> None:
    for name, mode in [("link", 0o120777), ("../evil", 0o100644)]:
        archive = tmp_path / "bad.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for f in ["set.json", *FILES]:
                zf.write(source / f, f)
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, "/etc/passwd")
        with pytest.raises(set_errors.SetUnsafeEntry):
            store.install(archive)
    assert store_entries(store) == []


def test_not_an_archive(store: SetStore, tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(100))
    with pytest.raises(set_errors.SetArchiveInvalid):
        store.install(junk)
    with pytest.raises(set_errors.SetArchiveInvalid):
        store.install(tmp_path / "absent")
    assert store_entries(store) == []


@pytest.mark.parametrize(
    ("limits", "match"),
    [
        (SetLimits(max_file_bytes=700), "decoder.onnx"),
        (SetLimits(max_total_bytes=800), "limit"),
        (SetLimits(max_files=2), "files"),
        (SetLimits(max_manifest_bytes=100), "set.json|limit"),
    ],
)
def test_oversize_refused(source: Path, tmp_path: Path, limits: SetLimits, match: str) -> None:
    store = SetStore(tmp_path / "sets", limits=limits)
    with pytest.raises(set_errors.SetTooLarge, match=match):
        store.install(source)
    assert store_entries(store) == []
    # an archive's declared sizes are refused before extraction, the same way
    archive = tmp_path / "set.tar"
    with tarfile.open(archive, "w") as tf:
        for name in ["set.json", *FILES]:
            tf.add(source / name, arcname=name)
    with pytest.raises(set_errors.SetTooLarge):
        store.install(archive)
    assert store_entries(store) == []


def test_failed_install_into_a_used_store_leaves_it_as_it_was(
    source: Path, store: SetStore, tmp_path: Path
) -> None:
    first = store.install(source)
    before = store_entries(store)
    other = tmp_path / "other"
    other.mkdir()
    make_set(other, name="other")
    (other / "decoder.onnx").write_bytes(b"changed")
    with pytest.raises(set_errors.SetFileMismatch):
        store.install(other)
    assert store_entries(store) == before == [first.digest]


def test_leftovers_of_a_killed_install_are_swept(source: Path, store: SetStore) -> None:
    store.root.mkdir(parents=True)
    old, recent = store.root / ".install-old", store.root / ".install-recent"
    (old / "set").mkdir(parents=True)
    recent.mkdir()
    os.utime(old, (0, 0))
    installed = store.install(source)
    assert store_entries(store) == sorted([".install-recent", installed.digest])


# --- opening a set for a decode -------------------------------------------------------------


def test_loaded_set_keeps_the_bytes_it_verified(source: Path, store: SetStore) -> None:
    installed = store.install(source)
    loaded = store.open(installed.digest)
    for name in FILES:
        (installed.path / name).write_bytes(b"changed on disk after the check")
    (installed.path / "decoder.onnx").unlink()
    assert {n: loaded.read(n) for n in loaded.names} == FILES
    assert loaded.has("decoder.onnx") and not loaded.has("nope")
    with pytest.raises(set_errors.SetFileMissing):
        loaded.read("nope")


def test_open_reads_each_file_once(
    source: Path, store: SetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = store.install(source)
    opened: list[str] = []
    from wai_dispatch.codec.sets import loaded as loaded_mod

    real = loaded_mod.open_regular

    def counting(path: Path) -> object:
        opened.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(loaded_mod, "open_regular", counting)
    loaded = store.open(installed.digest)
    assert sorted(opened) == sorted(["set.json", *(Path(n).name for n in FILES)])
    for name in FILES:
        loaded.read(name)
    assert len(opened) == len(FILES) + 1


def test_pins(source: Path, store: SetStore) -> None:
    digest = store.install(source).digest
    assert isinstance(store.open(digest, pin=Pin(CAP, digest, "decode-equivalence")), LoadedSet)
    with pytest.raises(set_errors.PinMismatch):
        store.open(digest, pin=Pin(CAP, "0" * 64))
    with pytest.raises(set_errors.PinMismatch):
        store.open(digest, pin=Pin("wai.neural.int_synth", digest))


def test_open_refuses_a_link_swapped_in(source: Path, store: SetStore, tmp_path: Path) -> None:
    installed = store.install(source)
    outside = tmp_path / "outside"
    outside.write_bytes(FILES["decoder.onnx"])
    (installed.path / "decoder.onnx").unlink()
    (installed.path / "decoder.onnx").symlink_to(outside)
    with pytest.raises(set_errors.SetUnsafeEntry):
        store.open(installed.digest)


@pytest.mark.parametrize("digest", ["../../etc", "A" * 64, "abc", ""])
def test_bad_digests(store: SetStore, digest: str) -> None:
    for call in (store.open, store.verify, store.remove, store.get):
        with pytest.raises(set_errors.SetDigestInvalid):
            call(digest)


# --- defaults and bundled sets --------------------------------------------------------------


def test_default_set(store: SetStore, tmp_path: Path) -> None:
    with pytest.raises(set_errors.SetNotInstalled):
        store.default_for(CAP)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    make_set(a, version="1")
    make_set(b, version="2")
    first = store.install(a)
    assert store.default_for(CAP) == first  # the only one
    second = store.install(b)
    with pytest.raises(set_errors.SetAmbiguous):
        store.default_for(CAP)  # two, none chosen: never a guess
    store.set_default(CAP, second.digest)
    assert store.default_for(CAP) == second
    with pytest.raises(set_errors.SetError, match="not"):
        store.set_default("other.capability", second.digest)
    store.remove(second.digest)
    assert store.defaults() == {}
    assert store.default_for(CAP) == first


def test_install_bundled_installed(source: Path, store: SetStore, tmp_path: Path) -> None:
    bundled = tmp_path / "bundled"
    (bundled / "demo").mkdir(parents=True)
    make_set(bundled / "demo")
    (bundled / "not-a-set").mkdir()
    installed = install_bundled(store, bundled).installed
    assert [s.name for s in installed] == ["demo"]
    assert install_bundled(store, bundled).installed == installed  # cheap the second time
    assert install_bundled(store, tmp_path / "none").installed == []


# --- config and CLI -------------------------------------------------------------------------


def test_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WAI_DATA_DIR", str(tmp_path / "w"))
    assert load().data_dir == tmp_path / "w"
    assert set_store_dir(load().data_dir) == tmp_path / "w" / "sets"
    assert load(data_dir=tmp_path / "o").data_dir == tmp_path / "o"
    monkeypatch.delenv("WAI_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert load().data_dir == tmp_path / "x" / "wai-dispatch"
    monkeypatch.setenv("XDG_DATA_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert load().data_dir == tmp_path / "h" / ".local" / "share" / "wai-dispatch"


def test_cli_list_on_an_empty_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAI_DATA_DIR", str(tmp_path / "data"))
    assert main(["sets", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    from wai_dispatch.conformance import sets_dir as bundled_dir

    store = SetStore(tmp_path / "data" / "sets")
    bundled = {s.name for s in install_bundled(store, Path(bundled_dir())).installed}
    assert {r["name"] for r in rows} == bundled  # [] until a bundled set exists


def test_cli_install_verify_remove(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dd = str(tmp_path / "data")
    assert main(["sets", "install", str(source), "--json", "--data-dir", dd]) == 0
    digest = json.loads(capsys.readouterr().out)["digest"]
    assert main(["sets", "list", "--json", "--data-dir", dd]) == 0
    rows = json.loads(capsys.readouterr().out)
    # A bundled set of the capability is its default; else the one set installed is.
    bundled_default = any(r["default"] and r["digest"] != digest for r in rows)
    assert any(r["digest"] == digest and r["default"] != bundled_default for r in rows)
    assert main(["sets", "verify", digest[:10], "--data-dir", dd]) == 0
    assert "every file matches" in capsys.readouterr().out
    (tmp_path / "data" / "sets" / digest / "decoder.onnx").write_bytes(b"x")
    assert main(["sets", "verify", digest, "--json", "--data-dir", dd]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["problems"][0]["file"] == "decoder.onnx"
    assert main(["sets", "default", CAP, digest, "--data-dir", dd]) == 0
    capsys.readouterr()
    assert main(["sets", "default", CAP, "--data-dir", dd]) == 0
    assert digest in capsys.readouterr().out
    assert main(["sets", "remove", digest, "--data-dir", dd]) == 0
    capsys.readouterr()
    assert main(["sets", "remove", digest, "--data-dir", dd]) == 2
    assert capsys.readouterr().err.startswith("wai-dispatch: error: set_not_installed: ")
    assert main(["sets", "install", str(tmp_path / "nothing"), "--json", "--data-dir", dd]) == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "set_archive_invalid"
