"""One registry of error codes (dispatch.codes.ErrorCode): docs/errors.md lists exactly it, and
every code the source raises or declares is in it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wai_dispatch.dispatch import Code, ErrorCode, WaiError
from wai_dispatch.dispatch.codes import is_code

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dispatch", "codec", "paths", "service", "cli", "tools")
DOC = ROOT / "docs" / "errors.md"


def _doc_codes() -> list[str]:
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return [re.match(r"\| `([a-z0-9_]+)` \|", row).group(1) for row in rows]  # type: ignore[union-attr]


def test_docs_list_exactly_the_registry() -> None:
    listed = _doc_codes()
    assert len(listed) == len(set(listed)), "docs/errors.md lists a code twice"
    assert set(listed) == {c.value for c in ErrorCode}, (
        f"only in docs: {sorted(set(listed) - set(ErrorCode))}; "
        f"only in ErrorCode: {sorted(set(ErrorCode) - set(listed))}"
    )


def _literal_codes() -> list[tuple[str, int, str]]:
    """Every ``code="…"`` keyword and ``code = "…"`` class attribute in the source."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                value: ast.expr | None = None
                if isinstance(node, ast.keyword) and node.arg == "code":
                    value = node.value
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id == "code" for t in targets):
                        value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    rel = str(path.relative_to(ROOT))
                    found.append((rel, value.lineno, value.value))
    return found


def test_every_code_in_the_source_is_registered() -> None:
    found = _literal_codes()
    assert len(found) > 30  # the scan sees the raise sites
    unregistered = [f"{where}:{line} {code}" for where, line, code in found if not is_code(code)]
    assert unregistered == []


def test_no_error_code_looks_like_a_refusal_code() -> None:
    assert not [c for c in ErrorCode if c.startswith("dispatch_")]
    assert not {c.value for c in Code} & {c.value for c in ErrorCode}


def test_every_code_has_a_one_line_meaning() -> None:
    for code in ErrorCode:
        assert code.meaning and "\n" not in code.meaning, code


def test_an_unregistered_code_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"not in dispatch\.codes\.ErrorCode"):

        class Bad(WaiError):
            code = "no_such_code"


def test_registered_subclass_keeps_its_code() -> None:
    from wai_dispatch.codec.payload import PayloadFormatError

    assert PayloadFormatError("x").code == ErrorCode.PAYLOAD_HEADER_INVALID
    assert PayloadFormatError("x", code="payload_magic").code == ErrorCode.PAYLOAD_MAGIC
