"""One registry of error codes (dispatch.codes.ErrorCode): docs/errors.md lists exactly it with
each code's HTTP status, and every raise site names a member of it, never a string."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wai_dispatch.dispatch import Code, ErrorCode, WaiError
from wai_dispatch.dispatch.codes import status_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dispatch", "codec", "paths", "service", "cli", "tools")
DOC = ROOT / "docs" / "errors.md"


def _doc_rows() -> list[tuple[str, int]]:
    """Each row of docs/errors.md's table: its code and its status."""
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    found = [re.match(r"\| `([a-z0-9_]+)` \| (\d{3}) \|", row) for row in rows]
    assert all(found), [row for row, m in zip(rows, found, strict=True) if m is None]
    return [(m.group(1), int(m.group(2))) for m in found if m]


def test_docs_list_exactly_the_registry() -> None:
    rows = _doc_rows()
    listed = [code for code, _ in rows]
    assert len(listed) == len(set(listed)), "docs/errors.md lists a code twice"
    assert set(listed) == {c.value for c in ErrorCode}, (
        f"only in docs: {sorted(set(listed) - set(ErrorCode))}; "
        f"only in ErrorCode: {sorted(set(ErrorCode) - set(listed))}"
    )
    wrong = [f"{c}: docs {s}, registry {status_of(c)}" for c, s in rows if status_of(c) != s]
    assert wrong == []


def test_every_status_is_an_error_status() -> None:
    for code in ErrorCode:
        assert type(code.status) is int and 400 <= code.status <= 599, code
    assert status_of("envelope_malformed") == 400 and status_of("internal_error") == 500
    assert ErrorCode("queue_full").status == 429
    with pytest.raises(ValueError):
        status_of("no_such_code")


def _code_sites() -> list[tuple[str, int, ast.expr]]:
    """Every ``code=…`` keyword and ``code = …`` assignment in the source, with its value."""
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
                if value is not None:
                    found.append((str(path.relative_to(ROOT)), value.lineno, value))
    return found


def test_every_raise_site_names_a_registry_member() -> None:
    """``code=ErrorCode.QUEUE_FULL``, never ``code="queue_full"``: a string, even a registered
    one, is refused here, so the registry is the one place a code is spelt."""
    found = _code_sites()
    members = [
        (where, line, v.attr)
        for where, line, v in found
        if isinstance(v, ast.Attribute)
        and isinstance(v.value, ast.Name)
        and v.value.id == "ErrorCode"
    ]
    assert len(members) > 100  # the scan sees the raise sites
    assert [(w, line, m) for w, line, m in members if m not in ErrorCode.__members__] == []
    strings = [
        f"{where}:{line} {ast.unparse(v)}"
        for where, line, v in found
        if isinstance(v, ast.JoinedStr)
        or (isinstance(v, ast.Constant) and isinstance(v.value, str))
    ]
    assert strings == []


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


def test_an_unregistered_code_is_refused_when_raised() -> None:
    with pytest.raises(TypeError, match=r"'no_such_code' is not in dispatch\.codes\.ErrorCode"):
        WaiError("x", code="no_such_code")
    assert WaiError("x", code=ErrorCode.QUEUE_FULL).code == "queue_full"


def test_registered_subclass_keeps_its_code() -> None:
    from wai_dispatch.codec.payload import PayloadFormatError

    assert PayloadFormatError("x").code == ErrorCode.PAYLOAD_HEADER_INVALID
    assert PayloadFormatError("x", code="payload_magic").code == ErrorCode.PAYLOAD_MAGIC
