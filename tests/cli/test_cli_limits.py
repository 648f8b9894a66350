"""Issue 16, item 2: a local decode is held to the service's time and memory estimate
(service/decoding/prepare.py) before it runs, and ``--no-limits`` lifts it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from _svc import SAMPLE_JSON, envelope_of_latent

from wai_dispatch.cli.main import main
from wai_dispatch.codec.envelope import Envelope, parse

_HEADER = struct.Struct("<4sBBHHHIII")  # codec/payload.py: magic … height, width …


def _asking_for(data_dir: Path, height: int, width: int) -> bytes:
    """A JSON envelope whose payload header asks for a latent of height × width (192
    channels): a small latent coded, its header's dimensions rewritten."""
    small = parse(envelope_of_latent(data_dir, 4, 4))
    fields = list(_HEADER.unpack_from(small.payload))
    fields[4], fields[5] = height, width
    payload = _HEADER.pack(*fields) + small.payload[_HEADER.size :]
    return Envelope(capability=small.capability, payload=payload, set=small.set).to_json()


def test_a_4096_square_decode_is_refused_fast_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default limit takes 4096 × 4096 (tiled synthesis); a lower one refuses it.
    monkeypatch.setenv("WAI_MAX_LATENT_ELEMENTS", str(192 * 64 * 64))
    data_dir = tmp_path / "data"
    envelope = tmp_path / "big.json"
    envelope.write_bytes(_asking_for(data_dir, 256, 256))  # 4096 × 4096 at 16× upsampling
    from wai_dispatch.service.usecase import decode as usecase

    def no_decode(*args: object) -> None:
        raise AssertionError("decoded although the estimate is over the limit")

    monkeypatch.setattr(usecase, "run", no_decode)  # refused from the headers, before any work
    status = main(["decode", str(envelope), "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("wai-dispatch: error: latent_over_limit: "), err
    assert "max_latent_elements=786432" in err and "--no-limits lifts it" in err
    assert len(err.strip().splitlines()) == 1


def test_the_memory_estimate_names_its_limit_and_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    envelope = tmp_path / "mid.json"
    envelope.write_bytes(_asking_for(data_dir, 64, 64))  # 1024²: about 624 MiB
    monkeypatch.setenv("WAI_MEMORY_BUDGET_BYTES", str(256 * 1024 * 1024))
    status = main(["decode", str(envelope), "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("wai-dispatch: error: decode_memory_over_budget: "), err
    assert "memory_budget_bytes=268435456" in err and "--no-limits" in err


def test_no_limits_lifts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAI_MAX_LATENT_ELEMENTS", "1")  # every decode is over it
    argv = ["decode", str(SAMPLE_JSON), "--data-dir", str(tmp_path / "data")]
    assert main(argv) == 2
    assert "latent_over_limit" in capsys.readouterr().err
    assert main([*argv, "--no-limits"]) == 0
    assert "picture" in capsys.readouterr().out
