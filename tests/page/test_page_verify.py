"""The page's WebNN verifier (service/web/page_files/verify.html, run by tools/verify_page.py) in
Debian's Chromium: with WebNN exposed but no context it verifies nothing ("absent", exit 1) while
every sample's symbols agree (the hyperprior's too) and replicate is refused with no context;
with the test-only reference WebNN context (tests/page/webnn_reference.js) it passes, the picture
within 40 dB of ONNX Runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pagekit import CHROMIUM, ROOT, free_port, serve_service

from wai_dispatch.tools import verify_page

NATIVE_DIGEST = "09c6186a09fd0e7b795a2c99c0594dbfaafadfc0f47af871a26e32bfdfbe5c44"
HYPER_DIGEST = "90830c3f5aa82cf41a6d9d47f770344a219136618f22ece725c1ab7d6aa7b6df"
REFERENCE_WEBNN = (ROOT / "tests" / "page" / "webnn_reference.js").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[tuple[str, str]]:
    """The page's URL and a sink token (the page's data routes take one)."""
    with serve_service(tmp_path_factory.mktemp("verify")) as (url, _, token):
        yield url, token


def by_sample(summary: dict[str, Any]) -> dict[str, Any]:
    return {row["sample"]: row for row in summary["samples"]}


def test_no_webnn_context_verifies_nothing(served: tuple[str, str]) -> None:
    url, token = served
    summary = verify_page.verify(str(CHROMIUM), url=url, token=token, extra_args=["--no-sandbox"])
    assert summary["verdict"] == "absent"
    rows = by_sample(summary)
    # the hyperprior's samples: the page runs their entropy stage (the integer hyper-synthesis)
    hyper = {k: rows.pop(k) for k in list(rows) if k.startswith("bmshj2018-hyperprior-")}
    assert set(hyper) == {
        "bmshj2018-hyperprior-int8-units-demo-q3.json",
        "bmshj2018-hyperprior-int8-units-demo-q3-replicate.json",
    }
    for row in hyper.values():
        assert row["symbols"] == {"page": HYPER_DIGEST, "native": HYPER_DIGEST}
    assert hyper["bmshj2018-hyperprior-int8-units-demo-q3.json"]["verdict"] == "absent"
    assert hyper["bmshj2018-hyperprior-int8-units-demo-q3.json"]["contexts"] == [
        "npu",
        "gpu",
        "cpu",
    ]
    replicated = hyper["bmshj2018-hyperprior-int8-units-demo-q3-replicate.json"]
    assert replicated["verdict"] == "pass" and replicated["contexts"] == []
    assert {"bmshj2018-demo-q3-replicate.json", "bmshj2018-demo-q3.json"} <= set(rows)
    for row in rows.values():
        # every bundled sample is coded from the same picture's latent (docs/int-synth-set.md)
        assert row["symbols"] == {"page": NATIVE_DIGEST, "native": NATIVE_DIGEST}
        if row["needed"] == "decode-equivalence":  # int_synth, or replicate: refused first
            assert row["verdict"] == "pass" and row["contexts"] == [], row
    plain = rows["bmshj2018-demo-q3.json"]
    assert plain["verdict"] == "absent" and plain["ran"] is None
    assert plain["contexts"] == ["npu", "gpu", "cpu"]
    assert any("WebNN is not supported on this platform" in why for why in plain["why"])
    replicate = rows["bmshj2018-demo-q3-replicate.json"]
    assert replicate["verdict"] == "pass" and replicate["contexts"] == []


@pytest.mark.slow
def test_reference_context_passes(served: tuple[str, str]) -> None:
    url, token = served
    summary = verify_page.verify(
        str(CHROMIUM),
        url=url,
        token=token,
        extra_args=["--no-sandbox"],
        init_script=REFERENCE_WEBNN,
    )
    assert summary["verdict"] == "pass", summary
    plain = by_sample(summary)["bmshj2018-demo-q3.json"]
    assert plain["ran"] == "npu/webnn/float"
    assert plain["contexts"] == ["npu"]
    assert plain["psnr"] >= 40.0
    assert plain["report"]["ran"]["placement"] is None
    # the hyperprior's synthesis on the stand-in, at the tier its class needs (§3)
    hyper = by_sample(summary)["bmshj2018-hyperprior-int8-units-demo-q3.json"]
    assert hyper["ran"] == "npu/webnn/float" and hyper["psnr"] >= 40.0
    assert hyper["report"]["ran"]["tier"] == "entropy-consistency"


@pytest.mark.slow
def test_command_against_a_url_needs_a_token_file(
    served: tuple[str, str], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a running service, the token comes from a file (never the command line or a
    URL); a dead one is the page's 401, shown as the verifier's error."""
    url, token = served
    with pytest.raises(SystemExit) as exited:
        verify_page.main(["--browser", str(CHROMIUM), "--url", url, "--no-sandbox"])
    assert exited.value.code == 2
    (tmp_path / "token").write_text(token + "\n")
    argv = ["--browser", str(CHROMIUM), "--url", url, "--token-file", str(tmp_path / "token")]
    assert verify_page.main([*argv, "--no-sandbox"]) == 1  # absent: no WebNN here
    assert "verdict  absent" in capsys.readouterr().out
    (tmp_path / "token").write_text("wai_not-a-live-token\n")
    assert verify_page.main([*argv, "--no-sandbox"]) == 1
    out = capsys.readouterr().out
    assert "verdict  fail" in out and "the bearer token is not a live token" in out


@pytest.mark.slow
def test_command_exit_status(capsys: pytest.CaptureFixture[str], browser: Any) -> None:
    """The command serves the page itself and exits 1 where the browser gives no WebNN."""
    argv = ["--browser", str(CHROMIUM), "--port", str(free_port())]
    assert verify_page.main([*argv, "--no-sandbox"]) == 1
    out = capsys.readouterr().out
    assert "verdict  absent" in out
    assert "bmshj2018-demo-q3-replicate.json" in out
