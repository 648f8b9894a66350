"""Read a YAML (or JSON) document into plain values with the line and column of every value, so a
schema error can point at the line. Bounded before anything is built: depth, values, integer
digits (the ``MAX_*`` below), core tags only, and no anchors or aliases (they let a short file
expand into a huge one); a mapping key written twice is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

#: Nesting allowed (a policy is four deep).
MAX_DEPTH = 64
#: Scalars, sequences and mappings a document may hold.
MAX_NODES = 100_000
#: Characters an integer may be written with (sign and ``_`` aside), as strictjson allows.
MAX_INT_DIGITS = 20
_CORE = "tag:yaml.org,2002:"
CORE_TAGS = frozenset(
    ["!"] + [_CORE + k for k in ("str", "int", "float", "bool", "null", "seq", "map")]
)

JsonPath = tuple[str | int, ...]
Marks = dict[JsonPath, tuple[int, int]]  # path → (line, column), both from 1


class MarkedError(ValueError):
    """The text does not read as YAML; ``line`` and ``column`` count from 1 (0 when unknown)."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


def load_marked(text: str) -> tuple[Any, Marks]:
    """The document's value and the marks of every value in it (``()`` is the root)."""
    try:
        depth = nodes = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            start = event.start_mark
            line, column = (start.line + 1, start.column + 1) if start else (0, 0)
            anchor = getattr(event, "anchor", None)
            if isinstance(event, yaml.AliasEvent) or anchor is not None:
                raise MarkedError("anchors and aliases are not allowed", line, column)
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in CORE_TAGS:
                raise MarkedError(f"the tag {tag[:40]!r} is not allowed", line, column)
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    raise MarkedError(f"more than {MAX_NODES} values", line, column)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise MarkedError(f"nested deeper than {MAX_DEPTH}", line, column)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise MarkedError("the document is empty", 1, 1)
            marks: Marks = {}
            value = _build(node, (), marks, loader.construct_object)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "not YAML"
        raise MarkedError(problem, line, column) from None
    except yaml.YAMLError as exc:
        raise MarkedError(str(exc).splitlines()[0]) from None
    return value, marks


def _build(node: yaml.Node, path: JsonPath, marks: Marks, scalar: Callable[..., Any]) -> Any:
    marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                raise _at(key_node, "a mapping key is a string")
            if key in out:
                raise _at(key_node, f"the key {key!r} is written twice")
            out[key] = _build(value_node, (*path, key), marks, scalar)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), marks, scalar) for i, item in enumerate(node.value)]
    if node.tag == _CORE + "int":
        digits = len(str(node.value).lstrip("+-").replace("_", ""))
        if digits > MAX_INT_DIGITS:
            raise _at(node, f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return scalar(node)


def _at(node: yaml.Node, message: str) -> MarkedError:
    return MarkedError(message, node.start_mark.line + 1, node.start_mark.column + 1)


def where(marks: Marks, path: JsonPath) -> tuple[int, int]:
    """The mark of ``path``, else of its nearest ancestor that has one."""
    while path not in marks and path:
        path = path[:-1]
    return marks.get(path, (0, 0))


def dotted(path: JsonPath) -> str:
    """``classes.kiosk.tiers[0]`` for a path; ``(document)`` for the root."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"
