"""Every fenced block of the README and docs/*.md, run or checked by the doc runner
(tools/doc_runner.py; what counts as a command and the markers: tools/doc_blocks.py), and the
runner's own parts on hand-written documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wai_dispatch.tools.doc_blocks import BlockError, compare, read_blocks
from wai_dispatch.tools.doc_folder import make_recipe
from wai_dispatch.tools.doc_paths import missing_paths, named_paths
from wai_dispatch.tools.doc_runner import doc_files, run_docs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_block_of_the_readme_and_docs_runs_or_says_why_not() -> None:
    run = run_docs()
    print(run.table())  # the counts, per file (pytest -s, or -rA, shows them)
    assert not run.failures, run.table() + "\n\n" + "\n\n".join(run.failures)
    total = run.total()
    fences = sum(
        len(re.findall(r"^\s*```", p.read_text(encoding="utf-8"), re.M)) // 2 for p in doc_files()
    )
    assert total["found"] == fences
    # each block is one of these (an output block is counted as compared only)
    kinds = ("run", "validated", "parsed", "synopsis", "marked", "text", "output")
    assert sum(total[k] for k in kinds) == total["found"], total
    # a floor, so a runner that silently stops running is a failure
    assert total["run"] >= 7 and total["compared"] >= 4 and total["validated"] >= 12, total
    assert total["paths"] >= 500 and "THIRD_PARTY.md" in run.counts, total


def write(tmp_path: Path, text: str) -> Path:
    doc = tmp_path / "doc.md"
    doc.write_text(text, encoding="utf-8")
    return doc


def test_markers_and_labels_are_read(tmp_path: Path) -> None:
    doc = write(
        tmp_path,
        "<!-- doc: skip macOS only -->\n```sh\nwai-dispatch plan\n```\n\n"
        "<!-- doc: skip `make test` the whole suite -->\n```sh\nmake demo  # c\nmake test\n```\n\n"
        "```\nno label\n```\n",
    )
    first, second, third = read_blocks(doc)
    assert first.skip == "macOS only" and first.line == 2
    assert [(c.text, c.skipped) for c in second.commands()] == [
        ("make demo", None),
        ("make test", "the whole suite"),
    ]
    assert third.problem is not None and third.problem.startswith(f"{doc}:12: a fence without")


def test_a_skip_without_a_reason_is_refused(tmp_path: Path) -> None:
    doc = write(tmp_path, "<!-- doc: skip -->\n```sh\ntrue\n```\n")
    with pytest.raises(BlockError, match="needs a reason"):
        read_blocks(doc)


def test_output_placeholders() -> None:
    shown = "took <TIME>\nwrote <PATH>\n…\nlast line with … inside\n"
    assert compare(shown, "took 1.5 ms\nwrote /tmp/x\na\nb\nlast line with words inside") is None
    assert compare(shown, "took 1.5 ms\nwrote /tmp/x\nlast line with  inside") is None
    problem = compare(shown, "took 1.5 ms\nwrote /tmp/x\nsomething else")
    assert problem is not None and "last line with" in problem
    assert compare("a\nb", "b\na") is not None


def test_make_targets_run_their_recipe() -> None:
    hint = (
        "echo 'wai-dispatch is .venv/bin/wai-dispatch (or run `. .venv/bin/activate`, then "
        "wai-dispatch)' >&2"
    )
    assert make_recipe("demo") == [".venv/bin/wai-dispatch demo -o out", hint]
    assert make_recipe("serve") == [hint, ".venv/bin/wai-dispatch serve"]


def test_a_failure_names_the_block_the_command_and_both_outputs(tmp_path: Path) -> None:
    doc = write(
        tmp_path,
        "intro\n\n```console\n$ echo hello\nhullo\n```\n\n"
        '```json\n{"kind": "wai-neural-dispatch/1", "capability": "wai.neural.bmshj2018",\n'
        ' "needed": "none", "ran": {"unit": "npu", "backend": "webnn", "arithmetic": "float",\n'
        ' "tier": "none", "placement": {"npu": 1, "gpu": 0, "cpu": 0, "unknown": 0}},\n'
        ' "refused": []}\n```\n\n'
        "<!-- doc: synopsis -->\n```sh\nwai-dispatch paths [--json] [--nope]\n```\n\n"
        "```sh\nfalse\n```\n",
    )
    run = run_docs([doc], workers=1)
    counts = run.counts[str(doc)]
    assert (counts["run"], counts["compared"], counts["validated"], counts["synopsis"]) == (
        2,
        1,
        1,
        1,
    )
    console, report, synopsis, status = run.failures
    assert console.startswith(f"{doc}:4: expected line 1 not in the output: 'hullo'")
    assert "command: echo hello" in console and "| hullo" in console and "| hello" in console
    assert report.startswith(f"{doc}:8: not a valid wai-neural-dispatch/1 report")
    assert synopsis.startswith(f"{doc}:17: wai-dispatch paths --help lists no --nope")
    assert status.startswith(f"{doc}:21: exit status 1") and "command: false" in status


def test_a_python_block_runs_and_a_failing_one_fails(tmp_path: Path) -> None:
    doc = write(
        tmp_path,
        "```python\nfrom wai_dispatch.dispatch import REGISTRY\n"
        'assert "wai.neural.bmshj2018" in REGISTRY\n```\n\n'
        "```python\nfrom dispatch import REGISTRY\n```\n\n"
        "<!-- doc: skip needs a Mac -->\n```python\nimport coremltools\n```\n",
    )
    run = run_docs([doc], workers=1)
    counts = run.counts[str(doc)]
    assert (counts["run"], counts["marked"]) == (2, 1), counts
    (failure,) = run.failures
    assert failure.startswith(f"{doc}:6: exit status 1 (the python block)"), failure
    assert "No module named 'dispatch'" in failure


def test_every_repository_path_the_prose_names_is_checked(tmp_path: Path) -> None:
    doc = write(
        tmp_path,
        "See `service/http/app.py`, `service/http/nope.py`, [the README](README.md), and\n"
        "[gone](docs/gone.md), `routes/decode.py`, `shared/seeds/001_…`, `docs/*.md`,\n"
        "`cpu/onnx-runtime/float`, `wai-ops/1`, `/v1/decode`, `~/.local/x.py`, `out/x.png`,\n"
        "`codec/{envelope,payload}.py`, `samples/NAME`.\n\n"
        "```text\nin a block: `not/checked.py`\n```\n",
    )
    named = [p for _, p, _ in named_paths(doc)]
    assert named == [
        "README.md",
        "service/http/app.py",
        "service/http/nope.py",
        "docs/gone.md",
        "routes/decode.py",
        "shared/seeds/",
        "docs/",
        "out/x.png",
        "codec/envelope.py",
        "codec/payload.py",
    ], named
    assert [(line, p.split("`")[1]) for line, p in missing_paths(doc)] == [
        (1, "service/http/nope.py"),
        (2, "docs/gone.md"),
        (2, "shared/seeds/"),
    ]
    run = run_docs([doc], workers=1)
    assert run.counts[str(doc)]["paths"] == len(named) and len(run.failures) == 3
