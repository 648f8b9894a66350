"""No function of the service, the decoding library or the CLI is over 60 lines (issue 35's
rule: a function that long holds more than one step; tools/ and tests/ are exempt, as scripts
and tables). A failure names each function and its length, so it can be split where it reads
in two."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60


def long_functions(source: str) -> list[tuple[str, int]]:
    """Each function (and method) of ``source`` over :data:`LIMIT` lines, with its length from
    ``def`` to its last line."""
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > LIMIT
    ]


def test_the_rule_finds_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    assert long_functions(f"def f():\n{body}\n") == [("f", LIMIT + 1)]
    assert long_functions(f"def f():\n{body[: body.rindex(chr(10))]}\n") == []


def test_no_function_over_60_lines_outside_tools_and_tests() -> None:
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = [
        f"{name} {path}: {n} lines"
        for path in files
        if not path.startswith(("tests/", "tools/"))
        for name, n in long_functions((ROOT / path).read_text(encoding="utf-8"))
    ]
    assert len(files) > 100
    assert found == [], "\n".join(found)
