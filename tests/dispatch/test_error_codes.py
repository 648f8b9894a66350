"""One registry of error codes, assembled from every layer's ``codes.py`` with the HTTP layer's
statuses (tools/error_registry.py): each code declared once, with a one-line meaning and a
status; docs/errors.md is generated from it and fails here when stale; every raise site names
a member of a layer's codes, never a string."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wai_dispatch.codec.codes import CodecCode
from wai_dispatch.dispatch import Code, WaiError
from wai_dispatch.dispatch.codes import ErrorCode, code_of
from wai_dispatch.service.http.codes import HttpCode
from wai_dispatch.service.http.statuses import STATUS, status_of
from wai_dispatch.tools import errors_doc
from wai_dispatch.tools.error_registry import LAYERS, codes, entries

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dispatch", "setfacts", "codec", "paths", "service", "cli", "tools")
DOC = ROOT / "docs" / "errors.md"


def _doc_rows() -> list[tuple[str, int]]:
    """Each row of docs/errors.md's table: its code and its status."""
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    found = [re.match(r"\| `([a-z0-9_]+)` \| (\d{3}) \|", row) for row in rows]
    assert all(found), [row for row, m in zip(rows, found, strict=True) if m is None]
    return [(m.group(1), int(m.group(2))) for m in found if m]


def test_docs_are_generated_from_the_registry() -> None:
    """docs/errors.md is exactly what tools/errors_doc.py writes: run it after a code changes."""
    assert DOC.read_text(encoding="utf-8") == errors_doc.render(), (
        "docs/errors.md is stale: python -m wai_dispatch.tools.errors_doc"
    )
    assert errors_doc.main(["--check"]) == 0


def test_a_stale_doc_is_refused(tmp_path: Path) -> None:
    stale = tmp_path / "errors.md"
    stale.write_text(errors_doc.render().replace("| 503 |", "| 500 |", 1), encoding="utf-8")
    assert errors_doc.main(["--check", "--output", str(stale)]) == 1
    assert errors_doc.main(["--output", str(stale)]) == 0
    assert errors_doc.main(["--check", "--output", str(stale)]) == 0


def test_docs_list_exactly_the_registry() -> None:
    rows = _doc_rows()
    listed = [code for code, _ in rows]
    assert len(listed) == len(set(listed)), "docs/errors.md lists a code twice"
    assert listed == [c.value for c in codes()]
    assert [(c, s) for c, s in rows if status_of(c) != s] == []


def test_each_code_is_declared_once() -> None:
    values = [c.value for c in codes()]
    assert len(values) == len(set(values)) > 100, "a code declared by two layers"
    assert {layer.codes for layer in LAYERS} == set(_subclasses(ErrorCode)), (
        "a layer's codes missing from tools/error_registry.py's LAYERS"
    )
    assert all(code_of(v) is not None for v in values)


def _subclasses(cls: type[ErrorCode]) -> list[type[ErrorCode]]:
    out: list[type[ErrorCode]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def test_every_code_has_a_status_and_no_status_is_left_over() -> None:
    """The HTTP layer assigns every registered code an error status, and nothing else."""
    for entry in entries():
        assert type(entry.status) is int and 400 <= entry.status <= 599, entry.code
    assert set(STATUS) == {c.value for c in codes()}
    assert status_of("envelope_malformed") == 400 and status_of("internal_error") == 500
    assert status_of(HttpCode.QUEUE_FULL) == 429
    with pytest.raises(ValueError):
        status_of("no_such_code")


def test_the_docs_claims_hold() -> None:
    """The claims issue 26 found false: every 5xx code in the 5xx list, no release that is
    not this one's, no code that nothing raises."""
    text = DOC.read_text(encoding="utf-8")
    fivexx = text.split("waits on:", 1)[1].split("`http_error`", 1)[0]
    for entry in entries():
        assert (f"`{entry.code.value}`" in fivexx) == ((entry.status or 0) >= 500), entry.code
    assert "set_registry_down" in fivexx
    assert "before 0.2" not in text and "page_entropy_unsupported" not in text


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
    """``code=HttpCode.QUEUE_FULL``, never ``code="queue_full"``: a string, even a registered
    one, is refused here, so the registry is the one place a code is spelt."""
    found = _code_sites()
    layers = {layer.codes.__name__: layer.codes for layer in LAYERS}
    members = [
        (where, line, v.value.id, v.attr)
        for where, line, v in found
        if isinstance(v, ast.Attribute)
        and isinstance(v.value, ast.Name)
        and v.value.id.endswith("Code")
        and v.value.id != "Code"  # dispatch.tokens.Code: §7's refusal codes
    ]
    assert len(members) > 100  # the scan sees the raise sites
    wrong = [
        f"{w}:{line} {cls}.{m}"
        for w, line, cls, m in members
        if cls not in layers or m not in layers[cls].__members__
    ]
    assert wrong == []
    # The sink's client (cli/remote.py) loads no package of ours but the CLI's, so its codes are
    # strings there, each held to the registry by tests/cli/test_cli_remote.py.
    strings = [
        f"{where}:{line} {ast.unparse(v)}"
        for where, line, v in found
        if (where != "cli/remote.py" and isinstance(v, ast.JoinedStr))
        or (where != "cli/remote.py" and isinstance(v, ast.Constant) and isinstance(v.value, str))
    ]
    assert strings == []


def test_no_error_code_looks_like_a_refusal_code() -> None:
    assert not [c for c in codes() if c.startswith("dispatch_")]
    assert not {c.value for c in Code} & {c.value for c in codes()}


def test_every_code_has_a_one_line_meaning_that_names_no_status() -> None:
    for code in codes():
        assert code.meaning and "\n" not in code.meaning, code
        assert not re.search(r"\b[45]\d\d\b", code.meaning), code


def test_an_unregistered_code_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"not a registered error code"):

        class Bad(WaiError):
            code = "no_such_code"


def test_an_unregistered_code_is_refused_when_raised() -> None:
    with pytest.raises(TypeError, match=r"'no_such_code' is not a registered error code"):
        WaiError("x", code="no_such_code")
    assert WaiError("x", code=HttpCode.QUEUE_FULL).code == "queue_full"


def test_registered_subclass_keeps_its_code() -> None:
    from wai_dispatch.codec.payload import PayloadFormatError

    assert PayloadFormatError("x").code == CodecCode.PAYLOAD_HEADER_INVALID
    assert PayloadFormatError("x", code="payload_magic").code == CodecCode.PAYLOAD_MAGIC
