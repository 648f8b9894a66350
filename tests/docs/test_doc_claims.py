"""Claims of the README and docs/ that a coverage audit (issue 21) found false, held to the code.
(The int_synth report of docs/dispatch.md and conformance vector 006 are held to the demo's run
in tests/cli/test_demo.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_the_documented_bound_refusal_is_the_message_the_rule_writes() -> None:
    source = text("paths/waiops/bounds.py")
    assert '{what} of channel {ch} reaches {hi_max} > 2^31 - 1 (bound rule)"' in source
    shown = re.findall(r"e\.g\. `([^`]*accumulator[^`]*)`", text("docs/wai-ops.md"))
    assert shown, "docs/wai-ops.md shows no example refusal"
    message = re.compile(
        r"^\w+: accumulator of channel \d+ reaches \d+ > 2\^31 - 1 \(bound rule\)$"
    )
    for example in shown:
        assert message.match(example), example


def test_no_doc_promises_what_exists_as_later() -> None:
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert "(later)" not in line, f"{doc.relative_to(ROOT)}:{n}: {line}"


def test_every_vendored_folder_is_listed_in_both_third_party_lists() -> None:
    vendored = sorted(p for p in (ROOT / "service" / "web").rglob("vendor") if p.is_dir())
    assert len(vendored) >= 2
    for listing in ("THIRD_PARTY.md", "docs/third-party.md"):
        body = text(listing)
        for folder in vendored:
            assert str(folder.relative_to(ROOT)) + "/" in body, (listing, folder)


def _placements(body: str) -> list[dict[str, object]]:
    """Every JSON object in ``body`` (inline code or a block) whose members are units."""
    found = []
    for candidate in re.findall(r"\{[^{}]*\}", body):
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj and set(obj) <= {"npu", "gpu", "cpu", "unknown"}:
            found.append(obj)
    return found


def test_a_placement_in_the_docs_has_all_four_members() -> None:
    """§5: a report's placement always names npu, gpu, cpu and unknown."""
    seen = 0
    for doc in DOCS:
        for placement in _placements(doc.read_text(encoding="utf-8")):
            seen += 1
            assert set(placement) == {"npu", "gpu", "cpu", "unknown"}, (doc.name, placement)
    assert seen >= 3


def test_the_fuzzing_section_names_every_long_fuzz_target() -> None:
    readme = text("README.md")
    section = readme[readme.index("## Fuzzing") :]
    targets = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"^@pytest\.mark\.fuzz$", p.read_text(encoding="utf-8"), re.M)
    )
    assert len(targets) >= 4
    for target in targets:
        assert f"`{target}`" in section, target


def test_the_program_cache_paragraph_names_every_path_that_keeps_programs() -> None:
    service = text("docs/service.md")
    paragraph = service[service.index("## Program cache") :].split("\n\n")[1]
    users = {
        "paths/onnx.py": "ONNX Runtime sessions",
        "paths/waiops/adapter.py": "`wai-ops/1` programs",
        "paths/coreml.py": "Core ML models",
        "paths/wgsl/adapter.py": "WGSL",
    }
    for module, words in users.items():
        assert "Programs" in text(module), module
        assert words in paragraph, words


def test_the_webnn_form_is_webnn_graphs_files_and_says_so() -> None:
    """§6.2 names offsets into ``decoder.f32``; the set holds webnn-graph's files, and
    docs/page.md says so (a deliberate choice)."""
    page = text("docs/page.md")
    assert "decoder.f32" in page and "decoder.weights" in page and "decoder.manifest.json" in page
    bundled = ROOT / "conformance" / "sets" / "bmshj2018-demo-q3"
    names = {p.name for p in bundled.iterdir()}
    assert {"decoder.webnn.json", "decoder.weights", "decoder.manifest.json"} <= names
    assert "decoder.f32" not in names
    webnn = text("service/web/page_files/js/webnn.js")
    assert "manifest.tensors[" in webnn and "decoder.f32" not in webnn
