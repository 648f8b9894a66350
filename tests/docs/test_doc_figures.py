"""The figures the docs take from the bundled sets (tools/doc_figures.py): each marked one reads
as computed now, the ones issue 35 found stale are marked, and the doc runner fails when any of
them is edited to a wrong value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wai_dispatch.tools.doc_figures import check_figures, figure
from wai_dispatch.tools.doc_runner import doc_files, run_docs

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"<!-- fig ([\w.-]+) -->")
#: The figures issue 35 found stale (weights retrained, the set rewritten), and where.
STALE = {
    "docs/wai-ops.md": {
        "int_synth.weight_max",
        "int_synth.weights.deconv1",
        "int_synth.weights.deconv2",
        "int_synth.weights.deconv3",
        "h_s.weight_max",
        "h_s.accumulator_max",
        "h_s.int8_bound",
        "h_s.int8_bound_share",
    },
    "docs/encode.md": {"int_synth.input_range"},
}


def marks() -> list[tuple[str, int, str]]:
    """``(doc, offset of the marker, figure name)`` for every marked figure of every doc."""
    return [
        (str(doc.relative_to(ROOT)), m.start(), m.group(1))
        for doc in doc_files(ROOT)
        for m in MARK.finditer(doc.read_text(encoding="utf-8"))
    ]


def wrong(value: str) -> str:
    """``value`` with its last digit (decimal, or hex in a digest) changed."""
    i = max(i for i, ch in enumerate(value) if ch in "0123456789abcdef")
    return value[:i] + ("1" if value[i] == "0" else "0") + value[i + 1 :]


def test_every_marked_figure_reads_as_computed() -> None:
    problems = [
        f"{doc.relative_to(ROOT)}:{line}: {problem}"
        for doc in doc_files(ROOT)
        for line, problem in check_figures(doc)[1]
    ]
    assert not problems, "\n".join(problems)
    assert len(marks()) >= 25


def test_the_figures_found_stale_are_marked() -> None:
    found = {(doc, name) for doc, _, name in marks()}
    for doc, names in STALE.items():
        for name in names:
            assert (doc, name) in found, (doc, name)


@pytest.mark.parametrize(("doc", "at", "name"), marks(), ids=lambda v: str(v))
def test_a_figure_edited_to_a_wrong_value_fails(
    tmp_path: Path, doc: str, at: int, name: str
) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    before = text[:at].removesuffix("`")
    value = figure(name)
    assert before.endswith(value)
    copy = tmp_path / Path(doc).name
    edited = before[: -len(value)] + wrong(value) + text[len(before) :]
    copy.write_text(edited, encoding="utf-8")
    line = text.count("\n", 0, at) + 1
    count, problems = check_figures(copy)
    assert count == len(MARK.findall(text))
    assert [(n, p.split(" is ")[0]) for n, p in problems] == [(line, f"the figure {name}")]


@pytest.mark.parametrize("name", sorted(set().union(*STALE.values())))
def test_the_doc_runner_fails_on_a_stale_figure(tmp_path: Path, name: str) -> None:
    """Through the runner itself: the issue's figures as the docs had them."""
    value = figure(name)
    doc = tmp_path / "doc.md"
    doc.write_text(f"right: {value}<!-- fig {name} -->\nwrong: {wrong(value)}<!-- fig {name} -->\n")
    run = run_docs([doc], workers=1)
    assert run.counts[str(doc)]["figures"] == 2
    (failure,) = run.failures
    assert failure.startswith(f"{doc}:2: the figure {name} is {value!r} now"), failure


def test_an_unknown_figure_is_a_failure(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("up to 3<!-- fig no.such.figure -->\n", encoding="utf-8")
    count, [(line, problem)] = check_figures(doc)
    assert (count, line) == (1, 1) and "'no.such.figure', which tools/doc_figures.py" in problem
