"""docs/spec-departures.md held to the code: the paths it names can exist, the page's offer it
lists is the page's, the codes are codes, the tests it cites exist, the evidence check it
describes is the one the test makes, and the README and docs/dispatch.md link it."""

from __future__ import annotations

import re
from pathlib import Path

from wai_dispatch.dispatch.offer import DispatchPath, impossible
from wai_dispatch.dispatch.tokens import Arithmetic, Backend, Code, Unit

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "spec-departures.md").read_text(encoding="utf-8")
JS = ROOT / "service" / "web" / "page_files" / "js"
PATH = re.compile(r"`((?:npu|gpu|cpu)/[a-z-]+/[a-z]+)`")


def section(number: int) -> str:
    return DOC.split(f"\n## {number}. ", 1)[1].split("\n## ", 1)[0]


def page_offer() -> list[str]:
    """The page's offer as app.js spells it, its constants written out."""
    paths = {
        name: "/".join(parts)
        for name, *parts in re.findall(
            r'export const (\w+) = path\("(\w+)", "([\w-]+)", "(\w+)"\)',
            (JS / "dispatch" / "offer.js").read_text(encoding="utf-8"),
        )
    }
    lists = {
        name: [paths[item.strip()] for item in items.split(",")]
        for module in ("webnn.js", "onnx.js")
        for name, items in re.findall(
            r"export const (\w+_PATHS) = Object\.freeze\(\[([^\]]*)\]\)",
            (JS / module).read_text(encoding="utf-8"),
        )
    }
    (items,) = re.findall(r"export const OFFER = \[([^\]]*)\]", (JS / "app.js").read_text())
    offer: list[str] = []
    for item in (i.strip() for i in items.split(",")):
        offer.extend(lists[item[3:]] if item.startswith("...") else [paths[item]])
    return offer


def test_every_path_named_can_exist() -> None:
    named = PATH.findall(DOC)
    assert len(named) >= 6
    for text in named:
        assert impossible(DispatchPath.parse(text)) is None, text


def test_the_page_offer_listed_is_the_pages() -> None:
    here = section(1).split("- **Here:**", 1)[1].split("\n- **", 1)[0]
    assert PATH.findall(here) == page_offer()


def test_every_code_named_is_a_code() -> None:
    errors = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    known = {c.value for c in Code} | set(re.findall(r"^\| `([a-z0-9_]+)` \|", errors, re.M))
    named = set(re.findall(r"`([a-z]+_[a-z_]+)`", DOC)) - {"default_offer"}
    codes = {n for n in named if n.startswith("dispatch_") or n.endswith("_offer")}
    assert codes and codes <= known, codes - known


def test_every_test_cited_exists() -> None:
    cited = re.findall(r"`(tests/[\w/]+\.py)` \(([^)]*)\)", DOC)
    assert len(cited) >= 8
    for path, names in cited:
        source = (ROOT / path).read_text(encoding="utf-8")
        for name in re.findall(r"`(test_\w+)`", names):
            assert f"def {name}(" in source, (path, name)


def test_the_impossible_paths_are_the_number_the_doc_gives() -> None:
    every = [DispatchPath(u, b, a) for u in Unit for b in Backend for a in Arithmetic]
    count = sum(impossible(p) is not None for p in every)
    assert f"the {count} unit/backend/arithmetic combinations" in " ".join(DOC.split())


def test_the_evidence_check_is_the_one_described() -> None:
    """Departure 2: a float path that ran is held to a plan with at least one operation on its
    unit, or none; a check made strict (all operations) ends the departure, and the doc must
    say so."""
    source = (ROOT / "tests" / "decoding" / "test_evidence_hardware.py").read_text("utf-8")
    assert "placement is None or placement[unit] > 0" in source
    assert "**at least one**" in section(2)


def test_the_doc_is_linked() -> None:
    for name in ("README.md", "docs/dispatch.md"):
        assert "spec-departures.md" in (ROOT / name).read_text(encoding="utf-8"), name
