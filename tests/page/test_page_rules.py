"""The page's port of the dispatch core (service/web/page_files/js/dispatch/) runs every conformance
vector inside Debian's Chromium and gives each vector's expected report exactly; those reports
validate with the project's validator. Also: every error code the page's modules raise is a
registered one (docs/errors.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pagekit import ROOT, open_page, serve_service

from wai_dispatch.dispatch import REGISTRY, Arithmetic, Capability, RegistryClass, Report
from wai_dispatch.tools.error_registry import is_registered as is_code

VECTORS = sorted((ROOT / "conformance" / "dispatch").glob("*.json"))
JS = ROOT / "service" / "web" / "page_files" / "js"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    with (
        serve_service(tmp_path_factory.mktemp("rules")) as (url, _, token),
        browser([], token=token) as page,
    ):
        open_page(page, url)
        yield page


@pytest.fixture(scope="module")
def page_reports(page: Any) -> dict[str, Any]:
    """Every vector's report as the page's rules compute it, keyed by file name."""
    vectors = {f.name: json.loads(f.read_text(encoding="utf-8")) for f in VECTORS}
    out: dict[str, Any] = page.evaluate(
        """async (vectors) => {
            const { runVector } = await import("./js/dispatch/scripted.js");
            const out = {};
            for (const [name, v] of Object.entries(vectors)) {
                try { out[name] = await runVector(v); }
                catch (err) { out[name] = { error: String(err) }; }
            }
            return out;
        }""",
        vectors,
    )
    assert page.errors == []
    return out


def test_every_vector_runs_in_the_browser(page_reports: dict[str, Any]) -> None:
    assert len(VECTORS) >= 45
    assert sorted(page_reports) == [f.name for f in VECTORS]


@pytest.mark.parametrize("file", VECTORS, ids=lambda f: f.name)
def test_vector_in_the_browser(page_reports: dict[str, Any], file: Path) -> None:
    vector = json.loads(file.read_text(encoding="utf-8"))
    got = page_reports[file.name]
    assert got == vector["expected"]
    # The page's report is exactly what the Python serialiser writes, member order included,
    # and validates with the project's report validator.
    assert list(got) == ["kind", "capability", "needed", "ran", "refused"]
    registry = REGISTRY
    spec = vector["capability"]
    if isinstance(spec, dict):
        cap = Capability(
            spec["name"], RegistryClass(spec["registry_class"]), Arithmetic(spec["networks"])
        )
        registry = REGISTRY.with_capability(cap)
    assert Report.from_json(got, registry=registry).to_json() == got


def test_the_page_refuses_a_bad_offer_as_python_does(page: Any) -> None:
    """An offer naming a path twice, or an integer path on npu, is invalid_offer in the page too."""
    codes = page.evaluate(
        """async () => {
            const { parseOffer } = await import("./js/dispatch/offer.js");
            const codes = [];
            for (const offer of [["cpu/webnn/float", "cpu/webnn/float"], ["npu/wgsl/integer"], [],
                                 ["cpu/webgl/float"]]) {
                try { parseOffer(offer); codes.push(null); } catch (err) { codes.push(err.code); }
            }
            return codes;
        }"""
    )
    assert codes == ["invalid_offer", "invalid_offer", "invalid_offer", "unknown_token"]


def test_the_page_holds_the_table_of_backends_python_holds(page: Any) -> None:
    """Issue 29: one table of backends' arithmetic and units (docs/dispatch.md); the page's
    copy is the core's, and the page refuses an impossible path with the core's message."""
    from wai_dispatch.dispatch.offer import (
        BACKEND_ARITHMETIC,
        BACKEND_UNITS,
        DispatchPath,
        impossible,
    )

    got = page.evaluate(
        """async () => {
            const m = await import("./js/dispatch/offer.js");
            const refused = {};
            for (const text of ["cpu/wai-ops/float", "gpu/wgsl/float", "cpu/model-runtime/float",
                                "gpu/onnx-runtime/integer", "npu/onnx-runtime/float"]) {
                try { m.parseOffer([text]); refused[text] = null; }
                catch (err) { refused[text] = [err.code, err.message]; }
            }
            return { arithmetic: m.BACKEND_ARITHMETIC, units: m.BACKEND_UNITS, refused };
        }"""
    )
    assert got["arithmetic"] == {str(b): str(a) for b, a in BACKEND_ARITHMETIC.items()}
    assert {b: sorted(u) for b, u in got["units"].items()} == {
        str(b): sorted(str(u) for u in units) for b, units in BACKEND_UNITS.items()
    }
    for text, answer in got["refused"].items():
        why = impossible(DispatchPath.parse(text))
        assert why is not None and answer == ["invalid_offer", f"path {why}"], text


def test_every_code_the_page_raises_is_registered() -> None:
    found = set()
    for path in JS.rglob("*.js"):
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'WaiError\(\s*"([a-z0-9_]+)"', text))
        found |= set(re.findall(r'err\(\s*"([a-z0-9_]+)"', text))
        found |= set(re.findall(r'code = "([a-z0-9_]+)"', text))
    assert len(found) > 15  # the scan sees the raise sites
    assert sorted(c for c in found if not is_code(c)) == []
