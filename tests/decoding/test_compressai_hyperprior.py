"""A CompressAI hyperprior bitstream said plainly (issue 30, item 5; docs/interop.md, "The
hyperprior"): ``import-compressai`` recognises ``ScaleHyperprior.compress()``'s output (two
latents; or a hyperprior model; or a hyperprior set or capability named) and refuses it with
one typed line that says why and what to do instead; a ``WAIH`` payload whose y stream does not
decode names the likely cause."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wai_dispatch.cli.main import main
from wai_dispatch.codec import hyperprior_payload as waih
from wai_dispatch.codec.compressai_rans import (
    CompressAIHyperpriorError,
    dump_compressed,
    load_compressed,
)
from wai_dispatch.codec.errors import CodecError
from wai_dispatch.codec.tables import laplacian_tables

HYPER = "wai.neural.bmshj2018_hyperprior"


def _two_latents(model: str = "bmshj2018-hyperprior") -> bytes:
    # compress() of a ScaleHyperprior: {"strings": [y_strings, z_strings], "shape": z's (h, w)}
    return dump_compressed([[b"\1" * 8], [b"\2" * 8]], (2, 3), model=model, quality=3)


@pytest.mark.parametrize(
    "data",
    [
        _two_latents(),
        _two_latents(model="m"),  # two latents, whatever the model says
        dump_compressed([[b"\1" * 8]], (8, 12), model="bmshj2018-hyperprior", quality=3),
        dump_compressed([[b"\1" * 8]], (8, 12), model="mbt2018-mean", quality=3),
    ],
)
def test_a_hyperprior_bitstream_is_recognised(data: bytes) -> None:
    with pytest.raises(CompressAIHyperpriorError) as err:
        load_compressed(data)
    assert err.value.code == "compressai_hyperprior_unsupported"
    message = err.value.message
    assert "4-12%" in message and "entropy-consistency" in message
    assert "wai-dispatch encode" in message


@pytest.mark.parametrize("how", ["file", "set", "capability"])
def test_import_compressai_refuses_it_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """The y strings alone, with the hyperprior set or capability named, are refused alike
    (before: ``set_facts_mismatch`` or ``set_no_tables``)."""
    path = tmp_path / "hp.compressai.json"
    data = tmp_path / "data"
    extra: list[str] = []
    if how == "file":
        path.write_bytes(_two_latents())
    else:
        path.write_bytes(dump_compressed([[b"\1" * 8]], (8, 12), model="", quality=3))
        if how == "capability":
            extra = ["--capability", HYPER]
        else:
            from wai_dispatch.conformance import sets_dir

            extra = ["--set", _digest(sets_dir() / "bmshj2018-hyperprior-int8-units-demo-q3")]
    argv = ["import-compressai", str(path), "-o", str(tmp_path / "e.json"), "--data-dir", str(data)]
    status = main(argv + extra)
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("wai-dispatch: error: compressai_hyperprior_unsupported: ")
    assert len(err.splitlines()) == 1 and "wai-dispatch encode" in err
    assert not (tmp_path / "e.json").exists()


def _digest(folder: Path) -> str:
    from wai_dispatch.codec.sets import Manifest

    return Manifest.from_bytes((folder / "set.json").read_bytes()).digest


def test_a_y_stream_coded_with_other_tables_names_the_likely_cause() -> None:
    """y coded with the indexes a float h_s would choose (a few positions differ) does not
    decode with the set's: the error names that cause."""
    z_tables, y_tables = laplacian_tables(4, seed=1), laplacian_tables(6, seed=2)
    rng = np.random.default_rng(5)
    z = rng.integers(-6, 7, size=(1, 4, 2, 3)).astype(np.int32)
    y = rng.integers(-20, 21, size=(1, 5, 8, 12)).astype(np.int32)
    theirs = rng.integers(0, 6, size=y.shape).astype(np.int32)
    ours = theirs.copy()
    flip = rng.random(size=y.shape) < 0.08
    ours[flip] = (ours[flip] + 3) % 6
    payload = waih.encode(z, y, theirs, z_tables, y_tables)
    header = waih.read_header(payload)
    with pytest.raises(CodecError) as err:
        got = waih.decode_y(payload, header, ours, y_tables)
        assert not np.array_equal(got, y)  # a stream that still decodes gives other symbols
    if err.value.code == "payload_stream_invalid":
        assert "float hyper-synthesis" in err.value.message
        assert "4-12%" in err.value.message
