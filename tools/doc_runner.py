"""Run the README's, ``THIRD_PARTY.md``'s and ``docs/*.md``'s fenced blocks (what counts and
the markers: ``tools/doc_blocks.py``) and hold every repository path their prose names to the
checkout (``tools/doc_paths.py``): ``python -m wai_dispatch.tools.doc_runner [FILE.md …]``
prints, per file, the blocks found, the commands and scripts run, the outputs compared, the data
blocks validated, the marked blocks and the paths checked, then every failure as ``file:line``,
the command, what the doc shows and what came out; exit 1 on a failure.
``tests/docs/test_doc_runner.py`` runs it in CI.

A ``python`` block is written to the folder's ``tmp/`` and run there with this interpreter, as
a command is (so ``from wai_dispatch… import …`` must work as a user's script has it).

How a command runs: in a fresh folder per doc file (its blocks in order share it), whose entries
are links to the checkout's (``docs/``, ``conformance/``, …) beside a ``.venv/bin`` of shims:
``wai-dispatch``, ``python`` and ``python3`` run this interpreter, which has the package. The
environment has no ``WAI_*`` variable but ``WAI_DATA_DIR`` (a clean data dir) and ``WAI_PORT`` (a
free port); ``HOME`` is the folder's own. ``/tmp/…`` in a command becomes the folder's ``tmp/``.
``make TARGET`` runs the Makefile's recipe for TARGET (the venv exists: the install steps it
depends on are not run). ``wai-dispatch serve`` (or a recipe that runs it) starts, must print
its URL and answer ``GET /openapi.json`` with 200 within :data:`READY_S`, and is then stopped
(SIGINT); its output so far is what it printed. Any other command must exit 0 within
:data:`TIMEOUT_S`. Before a comparison, the output's paths are written as a reader sees them:
the data dir as ``~/.local/share/wai-dispatch``, the checkout as ``/path/to/wai-dispatch``, the
folder's own paths relative, the port as 8080.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from wai_dispatch.tools.doc_blocks import (
    PYTHON_INFO,
    Block,
    BlockError,
    Command,
    compare,
    read_blocks,
)
from wai_dispatch.tools.doc_data import check_data
from wai_dispatch.tools.doc_paths import missing_paths, named_paths
from wai_dispatch.tools.doc_synopsis import check_synopsis

__all__ = ["READY_S", "TIMEOUT_S", "DocRun", "main", "run_docs"]

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120.0
READY_S = 30.0
_SERVE = re.compile(r"(^|\s)(\S*/)?wai-dispatch\s+serve(\s|$)")


@dataclass
class DocRun:
    """What a run found: counts per file and the failures, each one readable alone. A block
    is one of ``run`` (commands, or a ``python`` script), ``output`` (a command's output shown
    in a text block), ``validated``, ``parsed``, ``synopsis``, ``marked`` (skipped, with its
    reason) or ``text``; ``compared`` counts the run blocks that show output and the output
    blocks; ``paths`` the repository paths the file's prose names, each checked."""

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
        keys += ("synopsis", "marked", "text", "paths")
        rows = [f"{'file':<34}" + "".join(f"{k:>10}" for k in keys) + "  seconds"]
        for name, c in [*self.counts.items(), ("total", self.total())]:
            took = self.file_seconds.get(name, self.seconds)
            rows.append(f"{name:<34}" + "".join(f"{c[k]:>10}" for k in keys) + f"{took:>9.1f}")
        rows.append(f"{len(self.failures)} failure(s) in {self.seconds:.1f} s")
        return "\n".join(rows)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _is_root(entry: str) -> bool:
    try:
        return Path(entry).resolve() == ROOT
    except OSError:
        return False


def make_recipe(target: str, makefile: Path = ROOT / "Makefile") -> list[str]:
    """The recipe lines of ``target``, with the venv variables written out."""
    lines = makefile.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"^{re.escape(target)}\s*:(?!=)", line):
            recipe = []
            for body in lines[i + 1 :]:
                if not body.startswith("\t"):
                    break
                line = body[1:].removeprefix("@")  # make's "do not echo" prefix
                recipe.append(line.replace("$(BIN)", ".venv/bin").replace("$(VENV)", ".venv"))
            return recipe
    raise KeyError(f"the Makefile has no target {target!r}")


class Folder:
    """One doc file's folder: the checkout's entries, the shims, a clean data dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.data = root / "data"
        self.home = root / "home"
        for d in (self.work, self.data, self.home, self.work / "tmp"):
            d.mkdir(parents=True)
        for entry in ROOT.iterdir():
            if entry.name not in {".venv", "out", ".git", "tmp"}:
                (self.work / entry.name).symlink_to(entry)
        shims = self.work / ".venv" / "bin"
        shims.mkdir(parents=True)
        for name, argv in {
            "wai-dispatch": f'"{sys.executable}" -m wai_dispatch.cli',
            "python": f'"{sys.executable}"',
            "python3": f'"{sys.executable}"',
        }.items():
            (shims / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n', encoding="utf-8")
            (shims / name).chmod(0o755)
        # the import root alone, as an installed package has it: a doc's `import dispatch`
        # fails here as it does outside a checkout (the checkout's root is no import path)
        site = root / "site"
        site.mkdir()
        (site / "wai_dispatch").symlink_to(ROOT / "wai_dispatch", target_is_directory=True)
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WAI_")}
        env.pop("XDG_DATA_HOME", None)
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not _is_root(p)]
        env.update(
            WAI_DATA_DIR=str(self.data),
            WAI_PORT=str(self.port),
            HOME=str(self.home),
            PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join([str(site), *kept]),
        )
        self.env = env
        self.outputs: dict[str, str] = {}

    def readable(self, out: str) -> str:
        """``out`` with this folder's paths and port as the docs write them: the data dir as
        the default one, paths in the folder or the checkout relative (the docs' commands run
        at the checkout's root), the port as the default."""
        out = out.replace(str(self.data), "~/.local/share/wai-dispatch")
        for root in (self.work, ROOT):
            out = out.replace(str(root), ".")
        out = re.sub(r"(^|\s)\./", r"\1", out, flags=re.M)
        return out.replace(str(self.home), "~").replace(f":{self.port}", ":8080")

    def expand(self, text: str) -> list[str]:
        """The shell lines ``text`` stands for: a ``make`` target's recipe, ``/tmp/`` moved."""
        text = re.sub(r"(?<![\w/])/tmp/", str(self.work / "tmp") + "/", text)
        words = shlex.split(text)
        if len(words) == 2 and words[0] == "make":
            return make_recipe(words[1])
        return [text]

    def run(self, command: str) -> tuple[int, str]:
        """Exit status and the output (stdout and stderr, in order) of ``command``."""
        if _SERVE.search(command):
            return self._serve(command)
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.work,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else ""
            return 124, out + f"\n(no exit within {TIMEOUT_S:.0f} s)"
        return done.returncode, done.stdout.decode("utf-8", "replace")

    def _serve(self, command: str) -> tuple[int, str]:
        """Start, wait until it answers, stop: its stdout (the banner; its log, stderr, is
        shown only when it never got ready)."""
        import httpx

        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out: list[str] = []
        log: list[str] = []
        readers = [
            threading.Thread(target=_drain, args=(stream, sink), daemon=True)
            for stream, sink in ((proc.stdout, out), (proc.stderr, log))
        ]
        for reader in readers:
            reader.start()
        status, deadline = 1, time.monotonic() + READY_S
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                url = next((m.group(1) for ln in out if (m := _URL.search(ln))), None)
                if url is not None:
                    try:
                        if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                            status = 0
                            break
                    except httpx.HTTPError:
                        pass
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            for reader in readers:
                reader.join(5)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if status == 0:
            return 0, "".join(out)
        note = f"\n(not ready within {READY_S:.0f} s: no 200 from /openapi.json)"
        return status, "".join(out + log) + note


_URL = re.compile(r"serving on (http://\S+)")


def _drain(stream: IO[bytes] | None, sink: list[str]) -> None:
    if stream is not None:
        sink.extend(line.decode("utf-8", "replace") for line in stream)


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
