"""``python -m wai_dispatch.tools.doc_runner [FILE.md …]``: run the README's, ``THIRD_PARTY.md``'s
and ``docs/*.md``'s fenced blocks (:mod:`tools.doc_blocks`, each file in its own
:mod:`tools.doc_folder`), and hold the paths their prose names (:mod:`tools.doc_paths`) and the
figures it marks (:mod:`tools.doc_figures`) to the checkout; print the counts per file, then
each failure as ``file:line``, the command, what the doc shows and what came out; exit 1 on a
failure. A ``python`` block runs from the folder's ``tmp/`` with this interpreter, as a user's
script would."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from wai_dispatch.tools.doc_blocks import (
    PYTHON_INFO,
    Block,
    BlockError,
    Command,
    compare,
    read_blocks,
)
from wai_dispatch.tools.doc_data import check_data
from wai_dispatch.tools.doc_figures import check_figures
from wai_dispatch.tools.doc_folder import ROOT, Folder
from wai_dispatch.tools.doc_paths import missing_paths, named_paths
from wai_dispatch.tools.doc_synopsis import check_synopsis


@dataclass
class DocRun:
    """What a run found: per file, the blocks by outcome (``run``, ``output``, ``validated``,
    ``parsed``, ``synopsis``, ``marked``, ``text``; ``compared`` counts those whose output was
    compared), the ``paths`` and ``figures`` checked; and the failures, each readable alone."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    file_seconds: dict[str, float] = field(default_factory=dict)

    def total(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for c in self.counts.values():
            out.update(c)
        return out

    def table(self) -> str:
        keys: tuple[str, ...] = ("found", "run", "output", "compared", "validated", "parsed")
        keys += ("synopsis", "marked", "text", "paths", "figures")
        rows = [f"{'file':<34}" + "".join(f"{k:>10}" for k in keys) + "  seconds"]
        for name, c in [*self.counts.items(), ("total", self.total())]:
            took = self.file_seconds.get(name, self.seconds)
            rows.append(f"{name:<34}" + "".join(f"{c[k]:>10}" for k in keys) + f"{took:>9.1f}")
        rows.append(f"{len(self.failures)} failure(s) in {self.seconds:.1f} s")
        return "\n".join(rows)


def _failure(
    block: Block, command: Command | None, problem: str, shown: str = "", got: str = ""
) -> str:
    where = f"{block.path}:{command.line if command else block.line}"
    out = [f"{where}: {problem}"]
    if command is not None:
        out.append(f"  command: {command.text}")
    if shown:
        out.append("  the doc shows:\n" + "\n".join(f"    | {ln}" for ln in shown.splitlines()))
    if got or shown:
        out.append("  got:\n" + "\n".join(f"    | {ln}" for ln in got.splitlines()[-40:]))
    return "\n".join(out)


def _run_file(path: Path, name: str, run: DocRun) -> None:
    counts: Counter[str] = Counter()
    run.counts[name] = counts
    try:
        blocks = read_blocks(path, shown_as=Path(name))
    except BlockError as exc:
        run.failures.append(str(exc))
        return
    counts["found"] = len(blocks)
    missing = missing_paths(path)
    counts["paths"] = len(named_paths(path))
    run.failures.extend(f"{name}:{line}: {problem}" for line, problem in missing)
    counts["figures"], wrong = check_figures(path)
    run.failures.extend(f"{name}:{line}: {problem}" for line, problem in wrong)
    with tempfile.TemporaryDirectory(prefix="wai-docs-") as tmp:
        folder = Folder(Path(tmp))
        for block in blocks:
            if block.problem is not None:
                run.failures.append(block.problem)
            elif block.skip is not None:
                counts["marked"] += 1
            elif block.synopsis:
                counts["synopsis"] += 1
                run.failures.extend(f"{block.path}:{n}: {p}" for n, p in check_synopsis(block))
            elif block.is_command:
                _run_block(block, folder, counts, run)
            elif block.info in PYTHON_INFO:
                counts["run"] += 1
                script = folder.work / "tmp" / f"block-{block.line}.py"
                script.write_text(block.text + "\n", encoding="utf-8")
                status, out = folder.run(f"python tmp/{script.name}")
                if status != 0:
                    command = Command(f"python tmp/{script.name}", block.line)
                    problem = f"exit status {status} (the python block)"
                    run.failures.append(_failure(block, command, problem, got=out))
            elif block.info in ("json", "yaml"):
                outcome, problems = check_data(block)
                counts[outcome] += 1
                run.failures.extend(_failure(block, None, p) for p in problems)
            elif block.output_of is not None:
                counts["output"] += 1
                counts["compared"] += 1
                got = folder.outputs.get(block.output_of)
                if got is None:
                    run.failures.append(
                        _failure(
                            block, None, f"no command {block.output_of!r} ran above this output"
                        )
                    )
                elif (why := compare(block.text, got)) is not None:
                    run.failures.append(
                        _failure(
                            block, None, f"output of {block.output_of}: {why}", block.text, got
                        )
                    )
            else:
                counts["text"] += 1


def _run_block(block: Block, folder: Folder, counts: Counter[str], run: DocRun) -> None:
    commands = block.commands()
    if commands and all(c.skipped for c in commands):
        counts["marked"] += 1
        return
    counts["run"] += 1
    if any(c.expected for c in commands):
        counts["compared"] += 1
    for command in commands:
        if command.skipped:
            continue
        outputs = []
        for line in folder.expand(command.text):
            status, out = folder.run(line)
            outputs.append(folder.readable(out))
            if status != 0:
                run.failures.append(
                    _failure(
                        block, command, f"exit status {status} (running {line!r})", got=outputs[-1]
                    )
                )
                break
        got = "".join(outputs)
        folder.outputs[command.text] = got
        if command.expected and (why := compare(command.expected, got)) is not None:
            run.failures.append(_failure(block, command, why, command.expected, got))


def doc_files(root: Path = ROOT) -> list[Path]:
    """The files the runner covers: the README, ``THIRD_PARTY.md`` and every ``docs/*.md``."""
    return [root / "README.md", root / "THIRD_PARTY.md", *sorted((root / "docs").glob("*.md"))]


def run_docs(files: list[Path] | None = None, *, workers: int = 2) -> DocRun:
    """Run ``files`` (default :func:`doc_files`), ``workers`` files at a time (each in its own
    folder; the counts and failures come in the files' order)."""
    paths = files or doc_files()
    names = [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in paths]
    start = time.monotonic()

    def one(path: Path, name: str) -> DocRun:
        part = DocRun()
        began = time.monotonic()
        _run_file(path, name, part)
        part.file_seconds[name] = time.monotonic() - began
        return part

    run = DocRun()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for part in pool.map(one, paths, names):
            run.counts.update(part.counts)
            run.failures.extend(part.failures)
            run.file_seconds.update(part.file_seconds)
    run.seconds = time.monotonic() - start
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m wai_dispatch.tools.doc_runner", description=__doc__
    )
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="Markdown files (default: README.md, THIRD_PARTY.md, docs/*.md)",
    )
    parser.add_argument("--workers", type=int, default=2, help="files run at once (default 2)")
    args = parser.parse_args(argv)
    run = run_docs([p.resolve() for p in args.files] or None, workers=args.workers)
    print(run.table())
    for failure in run.failures:
        print("\n" + failure)
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
