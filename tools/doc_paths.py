"""The repository paths a doc's prose names (outside fenced blocks), held to the checkout.

A path is a link's target (resolved from the doc's folder; not a URL or an anchor alone), or
inline code with a ``/`` that ends with ``/`` or names a file with an extension, or a bare
``NAME.py`` / ``NAME.md``; not text with spaces, quotes, ``$%=<``, a leading ``/~.-@`` or a
scheme, nor a §1 token (``cpu/onnx-runtime/float``). A placeholder segment (``…``, ``*``, all
capitals) ends the path there; ``{a,b}`` expands; a trailing ``:NAME`` is dropped.

A path whose first part is a root entry must be exactly there (or beside the doc); any other
must end some path of the repository. Paths under :data:`ELSEWHERE` are not the repository's."""

from __future__ import annotations

import os
import re
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Paths the docs name that are not the repository's, and what each is.
ELSEWHERE = {
    "out/": "`make demo` writes its pictures there, the browser tests their screenshots",
    "bench-out/": "`make bench` writes its figures there",
    "test-artifacts/": "the browser tests' screenshots (git-ignored)",
    "spool/": "the data directory's spool folder",
    "cache/onnx/": "the data directory's cache of prepared ONNX graphs",
    "wgsl/constants.bin": "a set's file as the page's data route names it",
    "dist/": "uPlot's npm package's folder, where the vendored files come from",
    "examples/train.py": "CompressAI's training script, in CompressAI's repository",
    "Data/com.apple.CoreML/": "inside a Core ML .mlpackage",
    "com.apple.CoreML/": "inside a Core ML .mlpackage",
}
_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```+|~~~+)")
_NOT_A_PATH = re.compile(r"[\s<>$%=\\|'\"]|^[/~.\-@]|^[A-Za-z][\w+.-]*:")
_PLACEHOLDER = re.compile(r"…|\*|\?|^[A-Z][A-Z_]{2,}$")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]*$")
_BRACES = re.compile(r"\{([^{}]*)\}")


def _expand(text: str) -> list[str]:
    match = _BRACES.search(text)
    if match is None:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    return [p for part in match.group(1).split(",") for p in _expand(head + part + tail)]


def _as_path(text: str) -> list[str]:
    """The paths inline code ``text`` names (none, one, or a ``{…}`` group's)."""
    text = re.sub(r":[\w.]+$", "", text.strip())
    if _BRACES.search(text):
        return [p for e in _expand(text) for p in _as_path(e)]
    if not text or _NOT_A_PATH.search(text) or "{" in text or "}" in text:
        return []
    parts = text.split("/")
    if "/" in text:
        last = parts[-1]
        if not (text.endswith("/") or _EXTENSION.search(last) or re.search(r"…|\*", last)):
            return []  # a §1 token, a media type, a route's parameter (`samples/NAME`)
    elif not text.endswith((".py", ".md")):
        return []
    fixed = next((i for i, part in enumerate(parts) if _PLACEHOLDER.search(part)), None)
    if fixed is not None:  # the folders before the first placeholder
        return ["/".join(parts[:fixed]) + "/"] if fixed else []
    return [text]


def named_paths(doc: Path) -> list[tuple[int, str, bool]]:
    """``(line, path, is_link)`` for every path the prose of ``doc`` names."""
    found: list[tuple[int, str, bool]] = []
    fence: str | None = None
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if (mark := _FENCE.match(line)) is not None:
            ticks = mark.group(1)
            if fence is None:
                fence = ticks[0] * len(ticks)
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        for target in _LINK.findall(line):
            target = target.split("#", 1)[0]
            if target and not re.match(r"^[a-z]+:", target):
                found.append((n, target, True))
        for code in _CODE.findall(_LINK.sub("", line)):
            found.extend((n, p, False) for p in _as_path(code))
    return found


@cache
def repository_paths(root: Path = ROOT) -> frozenset[str]:
    """Every file and folder of the checkout (``a/b.py``, ``a/``), links not followed; not
    ``.git`` nor the folders ``.gitignore`` names (the checkout's build and tool output)."""
    ignored = (root / ".gitignore").read_text(encoding="utf-8").split()
    left_out = [".git", *(line.strip("/") for line in ignored if line.endswith("/"))]
    out: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not any(fnmatch(d, name) for name in left_out)]
        here = Path(folder).relative_to(root).as_posix()
        prefix = "" if here == "." else here + "/"
        out.update(prefix + d + "/" for d in dirs)
        out.update(prefix + f for f in files)
    return frozenset(out)


def missing_paths(doc: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """``(line, problem)`` for each path ``doc`` names that the checkout does not have."""
    top = {p.name for p in root.iterdir()}
    known = repository_paths(root)
    problems = []
    for line, path, is_link in named_paths(doc):
        if path.startswith(tuple(ELSEWHERE)):
            continue
        if is_link or path.split("/", 1)[0] in top:
            if (doc.parent / path).exists() or (root / path).exists():
                continue
            problems.append((line, f"names `{path}`, which the repository does not have"))
            continue
        want = path if path.endswith("/") else path.rstrip("/")
        if want in known or any(k.endswith("/" + want) for k in known):
            continue
        problems.append((line, f"names `{path}`, which no path of the repository ends with"))
    return problems
