"""The one strict JSON reader (dispatch/strictjson.py): what it refuses, each with its reason,
and that every reader of outside JSON in the package goes through it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from wai_dispatch.dispatch.strictjson import MAX_DEPTH, StrictJSONError, loads

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dispatch", "setfacts", "codec", "paths", "service", "cli")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1), "nested deeper"),
        (b'"\\ud800"', "lone surrogate"),
        (b'{"\\udc00": 1}', "lone surrogate"),
        ("[1]".encode("utf-16"), "not UTF-8"),
        ("[1]".encode("utf-32"), "not UTF-8"),
        (b"\xef\xbb\xbf[1]", "byte-order mark"),
        (b"[1, \xff]", "not UTF-8"),
        (b"NaN", "NaN"),
        (b"[-Infinity]", "Infinity"),
        (b"1e999", "overflows"),
        (b"1" * 5_000, "digits"),
        (b"-" + b"9" * 21, "21 digits"),
        (b'{"a": 1, "a": 2}', "duplicate key"),
    ],
)
def test_refused_with_its_reason(data: bytes, why: str) -> None:
    with pytest.raises(StrictJSONError, match=why):
        loads(data)


def test_a_refusal_is_a_value_error() -> None:
    """Callers that catch ValueError for bad JSON keep working."""
    with pytest.raises(ValueError):
        loads(b"NaN")
    with pytest.raises(json.JSONDecodeError):
        loads(b"[1,")


def test_size_limit() -> None:
    assert loads(b"[1]", max_bytes=3) == [1]
    with pytest.raises(StrictJSONError, match="over the limit of 3"):
        loads(b"[1] ", max_bytes=3)


def test_accepted_values_are_json_loads_values() -> None:
    doc = '{"a": [1, -2, 2.5, "\\u00e9\\ud83d\\ude00", null, true, false], "b": {"c": "[[["}}'
    assert loads(doc) == json.loads(doc)
    assert loads(doc.encode()) == json.loads(doc)
    for edge in (-(2**63), 2**64 - 1, -(2**64 - 1)):
        assert loads(str(edge)) == edge
    assert loads(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None


def _json_loads_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text("utf-8"))
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("loads", "load")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "json"
        ):
            lines.append(node.lineno)
    return lines


def test_every_reader_in_the_package_is_the_strict_one() -> None:
    """No module of the package parses JSON with ``json.loads``/``json.load`` except the
    reader itself: a second, laxer reader (one that accepts NaN, say) cannot come back."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "strictjson.py":
                continue
            # the sink's client loads no package of ours but the CLI's (tests/cli/
            # test_cli_remote.py); it reads the service's own answers
            if path.relative_to(ROOT).as_posix() == "cli/remote.py":
                continue
            lines = _json_loads_calls(path)
            if lines:
                found[str(path.relative_to(ROOT))] = lines
    assert found == {}
