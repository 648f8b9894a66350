"""The README's first command on the bundled corpus: `wai-dispatch demo` decodes the sample
envelopes with the bundled set, on this machine's offer, and says why other paths were refused."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wai_dispatch.cli.main import main
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.conformance import envelopes_dir, sets_dir
from wai_dispatch.dispatch import Report
from wai_dispatch.tools.sample_envelopes import sample_envelopes

SET = sets_dir() / "bmshj2018-demo-q3"


def test_sample_envelopes_are_what_the_tool_writes() -> None:
    """Regenerate with `python -m wai_dispatch.tools.sample_envelopes` after the bundled set
    changes."""
    for name, data in sample_envelopes(SET).items():
        assert (envelopes_dir() / name).read_bytes() == data, name


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    out = tmp_path_factory.mktemp("out")
    data = tmp_path_factory.mktemp("data")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["demo", "-o", str(out), "--data-dir", str(data), "--json"]) == 0
    return out, json.loads(buf.getvalue())


def test_demo_decodes_on_onnx_runtime_and_refuses_replicate(demo) -> None:  # type: ignore[no-untyped-def]
    _, outcomes = demo
    by_name = {Path(str(o["envelope"])).name: o for o in outcomes}
    expected = json.loads((SET / "payload.json").read_bytes())["symbols_digest"]
    for name in ("bmshj2018-demo-q3.json", "bmshj2018-demo-q3.cbor"):
        outcome = by_name[name]
        report = Report.from_json(outcome["reports"][0])  # type: ignore[index]
        assert outcome["decoded"] is True and report.ran is not None
        assert str(report.ran.path) == "cpu/onnx-runtime/float" and str(report.ran.tier) == "none"
        assert report.ran.placement is not None and report.ran.placement.cpu > 0
        if sys.platform != "darwin":
            assert [(str(r.path), str(r.reason)) for r in report.refused] == [
                ("npu/model-runtime/float", "dispatch_unit_absent")
            ]
        assert outcome["symbols_digest"] == expected
        assert outcome["set"] == Manifest.from_bytes((SET / "set.json").read_bytes()).digest
    refused = by_name["bmshj2018-demo-q3-replicate.json"]
    report = Report.from_json(refused["reports"][0])  # type: ignore[index]
    assert refused["decoded"] is False and report.ran is None
    assert [str(r.reason) for r in report.refused] == [
        "dispatch_tier_refused",
        "dispatch_tier_refused",
        "dispatch_arithmetic_mismatch",
    ]
    assert refused["symbols_digest"] == expected  # §3: the entropy stage is every path's


def test_demo_picture_is_the_coded_picture(demo) -> None:  # type: ignore[no-untyped-def]
    """The PNG is a recognisable picture: the crop the set writer coded, within the rate-
    distortion of our demo weights (payload.json's source says which crop)."""
    skimage_data = pytest.importorskip("skimage.data", reason="needs the tools extra")
    out, _ = demo
    png = np.asarray(Image.open(out / "bmshj2018-demo-q3.png"))
    cbor = np.asarray(Image.open(out / "bmshj2018-demo-q3-from-cbor.png"))
    assert png.shape == (256, 256, 3) and np.array_equal(png, cbor)
    src = json.loads((SET / "payload.json").read_bytes())["source"]
    image = getattr(skimage_data, src["image"].rsplit(".", 1)[-1])()
    crop = image[src["top"] : src["top"] + 256, src["left"] : src["left"] + 256]
    mse = float(np.mean((png.astype(np.float64) - crop.astype(np.float64)) ** 2))
    assert 10 * math.log10(255**2 / mse) >= 27.0


@pytest.mark.skipif(sys.platform == "darwin", reason="the documented run is the Linux one")
def test_documented_linux_report_and_readme_are_what_the_demo_prints(demo) -> None:  # type: ignore[no-untyped-def]
    """docs/dispatch.md's first example and the README's demo output are this machine's run:
    the placement counts the set's program's 16 operations (§5)."""
    import re

    _, outcomes = demo
    by_name = {Path(str(o["envelope"])).name: o for o in outcomes}
    report = by_name["bmshj2018-demo-q3.json"]["reports"][0]
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "dispatch.md").read_text()
    first = re.search(r"```json\n(.*?)```", docs, re.S)
    assert first is not None and json.loads(first.group(1)) == report
    readme = (root / "README.md").read_text()
    counts = " ".join(f"{k}={v}" for k, v in report["ran"]["placement"].items() if v)
    assert f"ran      cpu/onnx-runtime/float     tier none, placement {counts}" in readme
    assert counts == "cpu=16"


@pytest.mark.skipif(sys.platform == "darwin", reason="the documented run is the Linux one")
def test_the_int_synth_report_is_the_vector_and_the_documented_one(demo) -> None:  # type: ignore[no-untyped-def]
    """The real wai-ops adapter states its placement (every operation on the CPU, §5): the demo's
    int_synth report is conformance vector 006's (the reference offer) and docs/dispatch.md's
    third example, placement and all."""
    import re

    _, outcomes = demo
    by_name = {Path(str(o["envelope"])).name: o for o in outcomes}
    report = by_name["int-synth-int8-units-demo-q3.json"]["reports"][0]
    assert report["ran"]["placement"] == {"npu": 0, "gpu": 0, "cpu": 12, "unknown": 0}
    root = Path(__file__).resolve().parents[2]
    vector = json.loads(
        (root / "conformance/dispatch/006-int-synth-reference-offer.json").read_text("utf-8")
    )
    assert vector["expected"] == report
    assert vector["adapters"]["cpu/wai-ops/integer"]["plan"] == report["ran"]["placement"]
    docs = (root / "docs" / "dispatch.md").read_text()
    third = re.findall(r"```json\n(.*?)```", docs, re.S)[2]
    assert json.loads(third) == report


def test_demo_says_what_it_does_on_stderr_and_is_quiet_under_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Progress lines on standard error (issue 30: `make demo` printed nothing for 18 s under
    load); none with --json, and standard output is the same either way."""
    data = tmp_path / "data"
    assert main(["demo", "-o", str(tmp_path / "a"), "--data-dir", str(data)]) == 0
    text = capsys.readouterr()
    lines = text.err.splitlines()
    assert lines[0].startswith("demo: opening the bundled sets")
    count = len([p for p in envelopes_dir().iterdir() if p.suffix in (".json", ".cbor")])
    assert lines[1] == f"demo: decoding {count} sample envelopes…"
    assert "demo:" not in text.out
    assert main(["demo", "-o", str(tmp_path / "b"), "--data-dir", str(data), "--json"]) == 0
    assert capsys.readouterr().err == ""
