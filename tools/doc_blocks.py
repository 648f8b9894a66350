"""The fenced blocks of the README and ``docs/*.md`` as the doc runner reads them: each block's
info string, its lines and the ``<!-- doc: … -->`` markers above it, and the matching of a
command's output against the output a doc shows (README's "Docs that run" lists the info
strings, markers and placeholders). ``<!-- run: NAME -->`` marks a procedure of
docs/operations.md that tests/ops/ runs as written: not run here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

#: Info strings whose blocks are commands.
COMMAND_INFO = frozenset({"sh", "bash", "shell", "console"})
#: Info strings whose blocks are Python scripts.
PYTHON_INFO = frozenset({"python", "py"})
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")
_MARKER = re.compile(r"^\s*<!--\s*doc:\s*(.*?)\s*-->\s*$")
#: ``<!-- run: NAME -->``: a procedure of docs/operations.md that tests/ops/ runs as written,
#: with the environment it needs (a live store, a backup folder): marked here with that reason.
_RUN = re.compile(r"^\s*<!--\s*run:\s*(\S+)\s*-->\s*$")


class BlockError(ValueError):
    """A block or marker the runner cannot read (an unlabelled fence, a skip without reason)."""


@dataclass(frozen=True)
class Command:
    """One command of a block: its text, its line in the file, the output the doc shows
    (``None``: none shown) and, when it is skipped, why."""

    text: str
    line: int
    expected: str | None = None
    skipped: str | None = None


@dataclass
class Block:
    path: Path
    line: int  # the opening fence, 1-based
    info: str
    lines: list[str]
    skip: str | None = None  # the reason the whole block is not run
    skip_prefixes: dict[str, str] = field(default_factory=dict)
    synopsis: bool = False
    output_of: str | None = None
    problem: str | None = None  # a fence the runner cannot take as it is

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_command(self) -> bool:
        return self.info in COMMAND_INFO

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def commands(self) -> list[Command]:
        """The block's commands (with console output), comments stripped."""
        found: list[Command] = []
        if self.info == "console":
            for n, raw in enumerate(self.lines):
                if raw.startswith("$ "):
                    found.append(Command(raw[2:].strip(), self.line + 1 + n, ""))
                elif found:
                    last = found[-1]
                    shown = f"{last.expected}\n{raw}" if last.expected else raw
                    found[-1] = Command(last.text, last.line, shown)
        else:
            pending = ""
            for n, raw in enumerate(self.lines):
                text = pending + raw.strip()
                if text.endswith("\\"):
                    pending = text[:-1] + " "
                    continue
                pending = ""
                text = _strip_comment(text)
                if text:
                    found.append(Command(text, self.line + 1 + n))
        return [self._skipped(c) for c in found]

    def _skipped(self, command: Command) -> Command:
        for prefix, reason in self.skip_prefixes.items():
            if command.text.startswith(prefix):
                return Command(command.text, command.line, command.expected, reason)
        return command


def _strip_comment(text: str) -> str:
    """``text`` without a trailing ``# comment`` (outside quotes)."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text.rstrip()


def _apply_marker(block: Block, marker: str, where: str) -> None:
    if marker == "synopsis":
        block.synopsis = True
    elif marker.startswith("output of "):
        block.output_of = marker.removeprefix("output of ").strip()
    elif marker == "skip" or marker.startswith("skip "):
        rest = marker.removeprefix("skip").strip()
        prefix = re.match(r"`([^`]+)`\s*(.*)$", rest)
        reason = prefix.group(2) if prefix else rest
        if not reason:
            raise BlockError(f"{where}: a skip marker needs a reason: <!-- doc: skip REASON -->")
        if prefix:
            block.skip_prefixes[prefix.group(1)] = reason
        else:
            block.skip = reason
    else:
        raise BlockError(f"{where}: unknown marker <!-- doc: {marker} -->")


def read_blocks(path: Path, *, shown_as: Path | None = None) -> list[Block]:
    """The fenced blocks of ``path`` (named ``shown_as`` in messages), with their markers."""
    name = shown_as or path
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, info = fence.groups()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks[0] * len(ticks)):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise BlockError(f"{name}:{start + 1}: a fence that is never closed")
        block = Block(name, start + 1, info.lower(), body)
        if not info:
            block.problem = (
                f"{name}:{start + 1}: a fence without an info string: label it "
                "(sh, console, json, yaml, text, …; see tools/doc_blocks.py)"
            )
        above = start - 1
        while above >= 0:
            if marker := _MARKER.match(lines[above]):
                _apply_marker(block, marker.group(1), f"{name}:{above + 1}")
            elif run := _RUN.match(lines[above]):
                block.skip = f"the procedure {run.group(1)!r}, run as written by tests/ops/"
            else:
                break
            above -= 1
        blocks.append(block)
        i += 1
    return blocks


_PLACEHOLDERS = {
    "<PATH>": r"\S+",
    "<TIME>": r"[0-9][0-9.,]*\s?(?:ns|µs|us|ms|s|min)?",
    "<N>": r"-?[0-9][0-9,]*",
}


def _line_pattern(line: str) -> str:
    parts = re.split(r"(…|\.\.\.|<PATH>|<TIME>|<N>)", line.rstrip())
    out = []
    for part in parts:
        if part in ("…", "..."):
            out.append(".*?")
        elif part in _PLACEHOLDERS:
            out.append(_PLACEHOLDERS[part])
        else:
            out.append(re.escape(part))
    return "".join(out)


def compare(expected: str, got: str) -> str | None:
    """``None`` when ``got`` is what ``expected`` shows (placeholders above), else a short
    account of the first line that differs."""
    want = [line.rstrip() for line in expected.strip("\n").splitlines()]
    have = [line.rstrip() for line in got.strip("\n").splitlines()]
    pattern = []
    for line in want:
        if line.strip() in ("…", "..."):
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(_line_pattern(line) + r"\n")
    if re.fullmatch("".join(pattern), "\n".join(have) + "\n"):
        return None
    # the first expected line with no match, for the message
    for n, line in enumerate(want):
        if line.strip() in ("…", "..."):
            continue
        if not any(re.fullmatch(_line_pattern(line), h) for h in have):
            return f"expected line {n + 1} not in the output: {line!r}"
    return "every expected line is there, but not in this order (or extra lines)"
