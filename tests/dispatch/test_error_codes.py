"""One registry of error codes, assembled from the error classes (tools/error_registry.py): each
code declared by one class, in its own layer, with a kind, a one-line meaning and (for a code
that reaches the service) an HTTP status; docs/errors.md is generated from it and fails here
when stale; no raise site names a code at raise time."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from wai_dispatch.dispatch import Code, WaiError
from wai_dispatch.dispatch.errors import KINDS, kind_of
from wai_dispatch.tools import errors_doc
from wai_dispatch.tools.error_registry import MODULES, codes, entries, status

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dispatch", "setfacts", "codec", "paths", "service", "cli", "tools")
DOC = ROOT / "docs" / "errors.md"


def _doc_rows() -> list[tuple[str, str]]:
    """Each row of docs/errors.md's table of codes: its code and its status ('—': none)."""
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    found = [re.match(r"\| `([a-z0-9_]+)` \| [^|]+ \| (\d{3}|—) \|", row) for row in rows]
    return [(m.group(1), m.group(2)) for m in found if m]


def test_docs_are_generated_from_the_registry() -> None:
    """docs/errors.md is exactly what tools/errors_doc.py writes: run it after a class changes."""
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
    assert listed == codes()
    assert [(c, s) for c, s in rows if str(status(c) or "—") != s] == []


def _declared() -> dict[str, list[str]]:
    """Every class in the source that names a code (``code = "…"`` in its body): code to the
    modules that declare it."""
    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                for item in node.body:
                    if (
                        isinstance(item, ast.Assign)
                        and [ast.unparse(t) for t in item.targets] == ["code"]
                        and isinstance(item.value, ast.Constant)
                    ):
                        found.setdefault(str(item.value.value), []).append(module)
    return found


def test_each_code_is_declared_by_one_class_the_registry_finds() -> None:
    declared = _declared()
    assert {c: m for c, m in declared.items() if len(m) > 1} == {}, "a code declared twice"
    assert sorted(declared) == sorted(codes()), "a module missing from error_registry.MODULES"
    assert {m for ms in declared.values() for m in ms} == set(MODULES)
    assert len(codes()) > 100


def test_the_statuses_follow_the_kinds() -> None:
    """A code's status is its class's (its kind's, or the HTTP layer's own case); the CLI's and
    the tools' codes never reach the service and carry none."""
    for entry in entries():
        if entry.layer in ("cli", "tools"):
            assert entry.status is None, entry.code
        elif entry.status is not None:
            assert 400 <= entry.status <= 599, entry.code
    pinned = {"envelope_malformed": 400, "internal_error": 500, "queue_full": 429,
              "set_damaged": 503, "token_missing": 401, "run_report_sink_mismatch": 403,
              "decode_timeout": 504, "set_ambiguous": 409, "payload_truncated": 422}  # fmt: skip
    assert {code: status(code) for code in pinned} == pinned
    assert status("store_down") is None and status("remote_error") is None
    with pytest.raises(ValueError):
        status("no_such_code")


def test_every_class_has_one_kind() -> None:
    for entry in entries():
        if issubclass(entry.error, WaiError) and entry.code != "wai_error":
            kinds = [k for k in KINDS if issubclass(entry.error, k)]
            assert kind_of(entry.error) in kinds or entry.kind == "WaiError", entry.code


def test_the_docs_claims_hold() -> None:
    """The claims issue 26 found false: every 5xx code in the 5xx list, no release that is
    not this one's, no code that nothing raises."""
    text = DOC.read_text(encoding="utf-8")
    fivexx = text.split("waits on:", 1)[1].split("`http_error`", 1)[0]
    for entry in entries():
        assert (f"`{entry.code}`" in fivexx) == ((entry.status or 0) >= 500), entry.code
    assert "set_registry_down" in fivexx
    assert "before 0.2" not in text and "page_entropy_unsupported" not in text
    assert "payload_invalid" not in text  # documented once, never raised: gone


def test_no_raise_site_names_a_code() -> None:
    """A code is named by its class alone: no class is called with ``code=`` (the sink's client,
    cli/remote.py, keeps the service's code on the error it prints)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call) or where == "cli/remote.py":
                    continue
                called = ast.unparse(node.func).rsplit(".", 1)[-1]
                if called[:1].isupper() and any(k.arg == "code" for k in node.keywords):
                    found.append(f"{where}:{node.lineno}")
    assert found == []


def test_no_error_code_looks_like_a_refusal_code() -> None:
    assert not [c for c in codes() if c.startswith("dispatch_")]
    assert not {c.value for c in Code} & set(codes())


def test_every_code_has_a_one_line_meaning_that_names_no_status() -> None:
    for entry in entries():
        assert entry.meaning, entry.code
        assert not re.search(r"\b[45]\d\d\b", entry.meaning), entry.code


def test_a_subclass_keeps_its_code() -> None:
    from wai_dispatch.codec.errors import PayloadFormatError, PayloadMagic

    assert PayloadFormatError("x").code == "payload_header_invalid"
    assert PayloadMagic("x").code == "payload_magic" and isinstance(PayloadMagic("x"), ValueError)
