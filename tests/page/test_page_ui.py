"""The page's interface in Debian's Chromium against the real service (issue 19, item 7): a decode
that fails clears the previous envelope's picture, digests, paths and reports (only the error is
shown); the file picker is a visible control in the keyboard's tab order, reached with Tab."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pagekit import ROOT, open_page, screenshot, serve_service

SAMPLE = ROOT / "conformance" / "envelopes" / "bmshj2018-demo-q3.json"
REFERENCE_WEBNN = (ROOT / "tests" / "page" / "webnn_reference.js").read_text(encoding="utf-8")
# Painted pixels of the picture's canvas (alpha > 0): a cleared canvas has none.
PAINTED = """(() => { const c = document.getElementById('picture');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[tuple[str, str]]:
    with serve_service(tmp_path_factory.mktemp("ui")) as (url, _, token):
        yield url, token


def _result_shown(page: Any) -> dict[str, Any]:
    shown: dict[str, Any] = page.evaluate(
        """({hidden: document.getElementById('result').hidden,
             digests: document.querySelectorAll('#digests tbody tr').length,
             paths: document.querySelectorAll('#paths tbody tr').length,
             reports: document.getElementById('reports').textContent,
             caption: document.getElementById('picture-caption').textContent,
             picture: window.waiPage.picture !== null && window.waiPage.picture !== undefined})"""
    )
    shown["painted"] = page.evaluate(PAINTED)
    return shown


@pytest.mark.slow  # the good decode runs the synthesis in plain JavaScript (the WebNN stand-in)
def test_a_failed_decode_clears_the_previous_result(
    site: tuple[str, str], browser: Any, tmp_path: Path
) -> None:
    url, token = site
    with browser([], init_script=REFERENCE_WEBNN, token=token) as page:
        open_page(page, url)
        page.select_option("#sample", SAMPLE.name)
        good = page.evaluate("window.waiPage.decodeSample()")
        assert good["decoded"] is True and good["picture"]["width"] == 256, good
        before = _result_shown(page)
        assert before["hidden"] is False and before["picture"] is True
        assert before["painted"] == 256 * 256  # the picture is on the canvas
        assert before["digests"] >= 3 and before["paths"] >= 1
        assert "wai-neural-dispatch/1" in before["reports"]
        assert "256×256" in before["caption"]

        broken = tmp_path / "broken.json"
        broken.write_bytes(json.dumps({"format": "wai-envelope/2"}).encode())
        page.set_input_files("#file", str(broken))
        page.wait_for_function(
            "() => window.waiPage.last && window.waiPage.last.name === 'broken.json'"
        )
        assert page.evaluate("window.waiPage.last.error.code") == "envelope_format_unsupported"
        after = _result_shown(page)
        assert after == {
            "hidden": True,
            "digests": 0,
            "paths": 0,
            "reports": "",
            "caption": "",
            "picture": False,
            "painted": 0,
        }
        assert page.is_hidden("#result")
        assert page.get_attribute("#status", "data-state") == "error"
        status = page.inner_text("#status")
        assert "broken.json" in status and "envelope_format_unsupported" in status
        # the previous envelope's digests appear nowhere on the page any more
        symbols = good["parts"][0]["symbolsDigest"]
        assert symbols not in page.inner_text("body")
        screenshot(page, "failed-decode-cleared")
        assert page.errors == []


def test_the_file_picker_is_reached_with_tab(site: tuple[str, str], browser: Any) -> None:
    url, token = site
    with browser([], token=token) as page:
        # Listening turns the browser's chooser interception on, by a message Playwright sends
        # without waiting for its answer: listen first, so that the round trips below carry it
        # ahead of the key press (else, on a loaded machine, the key can open a native chooser
        # no event reports).
        choosers: list[Any] = []
        page.on("filechooser", lambda chooser: choosers.append(chooser))
        open_page(page, url)
        picker = page.locator("#file")
        assert picker.is_visible() and picker.get_attribute("tabindex") in (None, "0")
        # its label names it for assistive technology
        assert page.evaluate("document.getElementById('file').labels.length") == 1
        reached = []
        for _ in range(12):
            page.keyboard.press("Tab")
            active = page.evaluate("document.activeElement && document.activeElement.id")
            reached.append(active)
            if active == "file":
                break
        assert reached[-1] == "file", reached
        # operable from the keyboard: a key opens the browser's file chooser
        page.keyboard.press("Space")
        for _ in range(300):
            if choosers:
                break
            page.wait_for_timeout(100)
        assert len(choosers) == 1, "Space on the focused picker opened no file chooser"
        choosers[0].set_files(str(SAMPLE))
        page.wait_for_function(
            f"() => window.waiPage.last && window.waiPage.last.name === '{SAMPLE.name}'"
        )
        last = page.evaluate("window.waiPage.last")
        assert "error" not in last and last["parts"], last
        screenshot(page, "file-picker-focused")
        assert page.errors == []


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("only=nope", 'no corpus payload matches only=nope (not in the corpus: "nope")'),
        ("only=", "no corpus payload matches only="),
        (
            "only=chelsea-16x16,nope",
            'names payloads the corpus does not hold (not in the corpus: "nope")',
        ),
    ],
)
def test_verify_int_with_no_payload_selected_is_no_pass(
    site: tuple[str, str], browser: Any, query: str, says: str
) -> None:
    """Checking nothing is not a pass. Decided before WebGPU is asked for an adapter: this
    Chromium is started without WebGPU, and the page still says what is wrong."""
    url, token = site
    with browser([], token=token) as page:
        page.goto(f"{url}verify-int.html?{query}")
        page.wait_for_function("() => window.waiVerifyInt && window.waiVerifyInt.done")
        summary = page.evaluate("window.waiVerifyInt")
        text = page.inner_text("#verdict")
        assert summary["verdict"] == "none" and summary["rows"] == [], summary
        assert "error" not in summary  # not the verifier failing on the missing WebGPU
        assert text.startswith("NOT VERIFIED:") and says in text, text
        assert "PASS" not in text and "chelsea-16x16" in text  # the names it could have used
        assert page.get_attribute("#verdict", "data-state") == "error"
        assert page.locator("#checks tbody tr").count() == 0
        if query == "only=nope":
            screenshot(page, "verify-int-nothing-selected")
        assert page.errors == []


def test_the_page_reads_base64_only_in_its_canonical_spelling(
    site: tuple[str, str], browser: Any
) -> None:
    """As the service does (tests/codec/test_envelope.py): unpadded, over-padded, unused bits
    set, whitespace, the URL-safe alphabet: each is envelope_invalid, never decoded."""
    url, token = site
    with browser([], token=token) as page:
        open_page(page, url)
        codes = page.evaluate(
            """async (payloads) => {
              const out = [];
              for (const payload of payloads) {
                const body = JSON.stringify({ format: "wai-envelope/1",
                  capability: "wai.neural.bmshj2018", payload });
                const bytes = new TextEncoder().encode(body);
                const r = await window.waiPage.decodeBytes(bytes, "b.json");
                out.push(r.error ? r.error.code : "decoded");
              }
              return out;
            }""",
            ["AQI", "AR==", "AQJ=", "AQID====", "AQ I=", "AQI=\n", "-_-_"],
        )
        assert codes == ["envelope_invalid"] * 7
        assert page.errors == []
