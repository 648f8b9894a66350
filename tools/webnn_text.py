"""webnn-graph's ``.webnn`` text (its DSL, seed 004 "WebNN graph format") to and from the
GraphJson :mod:`tools.webnn_form` builds: :func:`parse_text` reads a document, :func:`to_text`
writes one, and a graph the text can hold is the same after parse → write → parse.

A const's ``init`` is ``@weights("ref")`` (also what a const without an annotation gets: its own
name), ``@scalar(v)`` or ``@bytes([…])``; a multi-output node has ``"outputs": [...]`` and its
first name as ``id``; a bare identifier among option values reads as a string. Refused: a
positional literal, a version other than 1 or 2, a dynamic dimension outside a v2 input, a
non-static constant, a block twice, a name declared twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

FORMAT = "webnn-graph-json"
_T = TypeVar("_T")
#: The text's data types and GraphJson's.
DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "i4": "int4",
    "u4": "uint4",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
    "i8": "int8",
    "u8": "uint8",
}
_TEXT = {v: k for k, v in DTYPES.items()}
_IDENT = r"[A-Za-z_/$][A-Za-z0-9_/$.]*"
_TOKEN = re.compile(
    rf"""(?P<space>[ \t\r\n]+|\#[^\n]*)
    |(?P<string>"(?:[^"\\\n]|\\.)*")
    |(?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    |(?P<ident>{_IDENT})
    |(?P<punct>[{{}}\[\]();:,=@])""",
    re.X,
)


class WebNNTextError(ValueError):
    """A ``.webnn`` document that does not read, with the line and column where it stops."""


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, str, int, int]] = []
        pos, line, col = 0, 1, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise WebNNTextError(f"line {line}, column {col}: unexpected {text[pos]!r}")
            kind = m.lastgroup or ""
            if kind != "space":
                self.items.append((kind, m.group(), line, col))
            chunk = m.group()
            if "\n" in chunk:
                line += chunk.count("\n")
                col = len(chunk) - chunk.rindex("\n")
            else:
                col += len(chunk)
            pos = m.end()
        self.items.append(("end", "", line, col))
        self.i = 0

    def peek(self, ahead: int = 0) -> tuple[str, str, int, int]:
        return self.items[min(self.i + ahead, len(self.items) - 1)]

    def error(self, what: str) -> WebNNTextError:
        _, text, line, col = self.peek()
        found = repr(text) if text else "the end"
        return WebNNTextError(f"line {line}, column {col}: {what}, found {found}")

    def take(self, kind: str, text: str | None = None) -> str:
        k, t, _, _ = self.peek()
        if k != kind or (text is not None and t != text):
            raise self.error(f"expected {text or kind}")
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text and self.peek()[0] in ("punct", "ident"):
            self.i += 1
            return True
        return False

    def each(self, close: str, item: Callable[[], _T]) -> list[_T]:
        """``item()`` for each item up to the punctuation ``close``, the items comma separated
        (a trailing comma allowed)."""
        out: list[_T] = []
        while not self.accept(close):
            out.append(item())
            if not self.accept(","):
                self.take("punct", close)
                break
        return out


def _string(tokens: _Tokens) -> str:
    value = json.loads(tokens.take("string"))
    assert isinstance(value, str)
    return value


def _int(tokens: _Tokens) -> int:
    text = tokens.take("number")
    if not re.fullmatch(r"-?[0-9]+", text):
        tokens.i -= 1
        raise tokens.error("expected an integer")
    return int(text)


def _value(tokens: _Tokens) -> Any:
    kind, text, _, _ = tokens.peek()
    if kind == "string":
        return _string(tokens)
    if kind == "number":
        tokens.i += 1
        return json.loads(text)
    if kind == "ident":
        tokens.i += 1
        return {"true": True, "false": False, "null": None}.get(text, text)
    if tokens.accept("["):
        return tokens.each("]", lambda: _value(tokens))
    if tokens.accept("{"):
        return dict(tokens.each("}", lambda: _member(tokens)))
    raise tokens.error("expected a value")


def _member(tokens: _Tokens) -> tuple[str, Any]:
    key = _string(tokens) if tokens.peek()[0] == "string" else tokens.take("ident")
    tokens.take("punct", ":")
    return key, _value(tokens)


def _shape(tokens: _Tokens, *, dynamic: bool, what: str) -> list[Any]:
    def dim() -> Any:
        if tokens.peek()[1] != "dyn" or tokens.peek(1)[1] != "(":
            return _int(tokens)
        if not dynamic:
            raise tokens.error(f"{what}: a dynamic dimension only in a v2 input")
        tokens.i += 2
        name = _string(tokens)
        tokens.take("punct", ",")
        size = _int(tokens)
        tokens.take("punct", ")")
        return {"name": name, "maxSize": size}

    tokens.take("punct", "[")
    return tokens.each("]", dim)


def _dtype(tokens: _Tokens) -> str:
    text = tokens.take("ident")
    if text not in DTYPES:
        tokens.i -= 1
        raise tokens.error(f"expected a data type ({', '.join(DTYPES)})")
    return DTYPES[text]


def _declare(tokens: _Tokens, seen: set[str], name: str) -> str:
    if name in seen:
        tokens.i -= 1
        raise tokens.error(f"{name!r} is declared twice")
    seen.add(name)
    return name


def _block(tokens: _Tokens, graph: dict[str, Any], seen: set[str]) -> None:
    block = tokens.take("ident")
    if block not in ("inputs", "consts", "nodes", "outputs"):
        tokens.i -= 1
        raise tokens.error("expected inputs, consts, nodes or outputs")
    if block in graph:
        tokens.i -= 1
        raise tokens.error(f"a second {block} block")
    tokens.take("punct", "{")
    graph[block] = [] if block == "nodes" else {}
    while not tokens.accept("}"):
        if block in ("inputs", "consts"):
            name = _declare(tokens, seen, tokens.take("ident"))
            tokens.take("punct", ":")
            dtype = _dtype(tokens)
            dynamic = block == "inputs" and graph["version"] >= 2
            shape = _shape(tokens, dynamic=dynamic, what=f"{block[:-1]} {name}")
            graph[block][name] = {"dataType": dtype, "shape": shape}
            if block == "consts":
                graph[block][name]["init"] = _init(tokens, name)
        elif block == "nodes":
            graph["nodes"].append(_node(tokens, seen))
        else:
            name = tokens.take("ident")
            graph["outputs"][name] = name
        tokens.take("punct", ";")


def _init(tokens: _Tokens, name: str) -> dict[str, Any]:
    if not tokens.accept("@"):
        return {"kind": "weights", "ref": name}
    kind = tokens.take("ident")
    tokens.take("punct", "(")
    if kind == "weights":
        init: dict[str, Any] = {"kind": "weights", "ref": _string(tokens)}
    elif kind == "scalar":
        value = _value(tokens)
        if not isinstance(value, int | float) or isinstance(value, bool):
            tokens.i -= 1
            raise tokens.error("@scalar takes a number")
        init = {"kind": "scalar", "value": value}
    elif kind == "bytes":
        data = _value(tokens)
        if not isinstance(data, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in data
        ):
            raise tokens.error("@bytes takes a list of bytes (0–255)")
        init = {"kind": "bytes", "data": data}
    else:
        tokens.i -= 2
        raise tokens.error("expected @weights, @scalar or @bytes")
    tokens.take("punct", ")")
    return init


def _node(tokens: _Tokens, seen: set[str]) -> dict[str, Any]:
    outputs: list[str] | None = None
    if tokens.accept("["):
        outputs = tokens.each("]", lambda: _declare(tokens, seen, tokens.take("ident")))
        if not outputs:
            raise tokens.error("a node with no output")
        ident = outputs[0]
    else:
        ident = _declare(tokens, seen, tokens.take("ident"))
    tokens.take("punct", "=")
    op = tokens.take("ident")
    tokens.take("punct", "(")
    inputs: list[str] = []
    options: dict[str, Any] = {}

    def argument() -> None:
        if tokens.peek()[0] == "ident" and tokens.peek(1)[1] == "=":
            key = tokens.take("ident")
            tokens.take("punct", "=")
            options[key] = _value(tokens)
        elif options:
            raise tokens.error("an operand after a named argument")
        elif tokens.peek()[0] == "ident" and tokens.peek()[1] not in ("true", "false", "null"):
            inputs.append(tokens.take("ident"))
        else:
            raise tokens.error("a positional literal (GraphJson's operands are names)")

    tokens.each(")", argument)
    return {"id": ident, "op": op, "inputs": inputs, "options": options, "outputs": outputs}


def parse_text(text: str | bytes) -> dict[str, Any]:
    """The GraphJson of a ``.webnn`` document; :class:`WebNNTextError` (line, column) if it
    does not read."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WebNNTextError(f"not UTF-8: {exc}") from None
    tokens = _Tokens(text)
    tokens.take("ident", "webnn_graph")
    name = _string(tokens)
    version_text = tokens.take("ident")
    if version_text not in ("v1", "v2"):
        tokens.i -= 1
        raise tokens.error("expected the version, v1 or v2")
    quantized = False
    if tokens.accept("@"):
        tokens.take("ident", "quantized")
        quantized = True
    graph: dict[str, Any] = {"version": int(version_text[1:])}
    tokens.take("punct", "{")
    seen: set[str] = set()
    while not tokens.accept("}"):
        _block(tokens, graph, seen)
    tokens.take("end")
    return {
        "format": FORMAT,
        "version": graph["version"],
        "name": name,
        "quantized": quantized,
        "inputs": graph.get("inputs", {}),
        "consts": graph.get("consts", {}),
        "nodes": graph.get("nodes", []),
        "outputs": graph.get("outputs", {}),
    }


# -- writing -------------------------------------------------------------------------------------


def _write_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return json.dumps(value, allow_nan=False)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_write_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        members = (f"{_write_key(k)}: {_write_value(v)}" for k, v in value.items())
        return "{" + ", ".join(members) + "}"
    raise WebNNTextError(f"cannot write {value!r} in the text format")


def _write_key(key: str) -> str:
    return key if re.fullmatch(_IDENT, key) else json.dumps(key)


def _dim(dim: Any) -> str:
    if isinstance(dim, Mapping):
        return f"dyn({json.dumps(dim['name'])}, {int(dim['maxSize'])})"
    return str(int(dim))


def _name(name: str) -> str:
    if not re.fullmatch(_IDENT, name) or name in ("true", "false", "null"):
        raise WebNNTextError(f"{name!r} is not an identifier of the text format")
    return name


def _write_init(name: str, init: Mapping[str, Any]) -> str:
    if init["kind"] == "weights":
        return f"@weights({json.dumps(init['ref'])})"
    if init["kind"] == "scalar":
        return f"@scalar({_write_value(init['value'])})"
    if init["kind"] == "bytes":
        return f"@bytes({_write_value(list(init['data']))})"
    raise WebNNTextError(f"const {name}: no text for init {init['kind']!r}")


def to_text(graph: Mapping[str, Any]) -> str:
    """The ``.webnn`` text of the GraphJson (every block written, empty or not)."""
    quantized = " @quantized" if graph.get("quantized") else ""
    lines = [f"webnn_graph {json.dumps(graph['name'])} v{int(graph['version'])}{quantized} {{"]
    lines.append("  inputs {")
    for name, desc in graph["inputs"].items():
        shape = ", ".join(_dim(d) for d in desc["shape"])
        lines.append(f"    {_name(name)}: {_TEXT[desc['dataType']]}[{shape}];")
    lines.append("  }")
    lines.append("  consts {")
    for name, decl in graph["consts"].items():
        shape = ", ".join(str(int(d)) for d in decl["shape"])
        init = _write_init(name, decl["init"])
        lines.append(f"    {_name(name)}: {_TEXT[decl['dataType']]}[{shape}] {init};")
    lines.append("  }")
    lines.append("  nodes {")
    for node in graph["nodes"]:
        args = [_name(n) for n in node["inputs"]]
        args += [f"{_name(k)}={_write_value(v)}" for k, v in node["options"].items()]
        outputs = node.get("outputs")
        target = f"[{', '.join(map(_name, outputs))}]" if outputs else _name(node["id"])
        lines.append(f"    {target} = {node['op']}({', '.join(args)});")
    lines.append("  }")
    lines.append(f"  outputs {{ {' '.join(f'{_name(k)};' for k in graph['outputs'])} }}")
    lines.append("}")
    return "\n".join(lines) + "\n"
