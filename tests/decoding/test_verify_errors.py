"""``wai-dispatch verify`` on a set whose ``payload_info`` is malformed: the set's payload check
fails with ``set_payload_info_invalid`` and says why, the other sets are still checked, and
nothing ends in a traceback (JSONDecodeError, KeyError, TypeError)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.sets import Manifest, SetStore, write_manifest
from wai_dispatch.conformance import sets_dir

BUNDLED = sets_dir() / "bmshj2018-demo-q3"
BAD_INFO = {
    "not-json": b"{not json",
    "no-digest": b'{"latent_shape": [1, 192, 16, 16]}',
    "digest-not-text": b'{"symbols_digest": 7}',
    "an-array": b"[1, 2]",
    "deep": b"[" * 100_000,
}


def damaged_set(tmp_path: Path, info: bytes | None, **facts_change: object) -> Path:
    folder = tmp_path / "set"
    shutil.copytree(BUNDLED, folder)
    manifest = Manifest.from_bytes((folder / "set.json").read_bytes())
    if info is None:
        (folder / "payload.json").unlink()
    else:
        (folder / "payload.json").write_bytes(info)
    facts = {**json.loads(manifest.canonical())["facts"], **facts_change}
    write_manifest(folder, name="damaged", capability=manifest.capability, version="2", facts=facts)
    return folder


def verify_json(capsys: pytest.CaptureFixture[str], data: Path) -> tuple[int, dict[str, object]]:
    status = main(["verify", "--data-dir", str(data), "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, json.loads(out)


@pytest.mark.parametrize("name", list(BAD_INFO))
def test_verify_payload_info_is_typed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    data = tmp_path / "data"
    damaged = SetStore(data / "sets").install(damaged_set(tmp_path, BAD_INFO[name]))
    status, result = verify_json(capsys, data)
    assert status == 1 and result["ok"] is False
    rows = {s["set"]: s for s in result["sets"]}  # type: ignore[attr-defined]
    (check,) = rows[damaged.digest]["checks"]
    assert check["ok"] is False
    assert check["reason"].startswith("set_payload_info_invalid: ")
    assert "payload.json" in check["reason"] and "\n" not in check["reason"]
    others = [s for d, s in rows.items() if d != damaged.digest]
    assert others and all(c["ok"] is not False for s in others for c in s["checks"])


def test_verify_payload_info_absent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    damaged = SetStore(data / "sets").install(damaged_set(tmp_path, None))
    _, result = verify_json(capsys, data)
    rows = {s["set"]: s for s in result["sets"]}  # type: ignore[attr-defined]
    (check,) = rows[damaged.digest]["checks"]
    assert check["reason"].startswith("set_payload_info_invalid: ")
    assert "not a file of the set" in check["reason"]


def test_expected_symbols_digest_raises_the_typed_error(tmp_path: Path) -> None:
    from wai_dispatch.codec.sets import load
    from wai_dispatch.service.decoding.verify import expected_symbols_digest

    folder = damaged_set(tmp_path, BAD_INFO["no-digest"])
    digest = Manifest.from_bytes((folder / "set.json").read_bytes()).digest
    with pytest.raises(CodecError) as info:
        expected_symbols_digest(load(folder, digest))
    assert info.value.code == "set_payload_info_invalid"
