"""The ``.webnn`` text (seed 004, webnn-graph's DSL) read back: the committed decoder.webnn is
checked by parsing it (its graph is decoder.webnn.json's), and parse → write → parse keeps every
graph, the bundled one and the seed's own cases. No torch: these run without the tools extra."""

from __future__ import annotations

import json
from typing import Any

import pytest

from wai_dispatch.conformance import sets_dir
from wai_dispatch.tools.webnn_text import WebNNTextError, parse_text, to_text

BUNDLED = sets_dir() / "bmshj2018-demo-q3"

#: The seed's "Document structure" example, as written there.
SEED_EXAMPLE = """webnn_graph "example" v2 @quantized {
  inputs {
    input: f32[dyn("batch", 8), 4];
  }

  consts {
    bias: f32[] @scalar(0.5);
    bytes: u8[4] @bytes([1, 2, 3, 4]);
    weight: f32[4, 4] @weights("weight");
  }

  nodes {
    sum = add(input, bias, metadata={kind: "example", axes: [1]});
    [left, right] = split(sum, splits=[2, 2], axis=1);
    result = concat(left, right, axis=1);
  }

  outputs { result; }
}
"""


def roundtrip(graph: dict[str, Any]) -> None:
    text = to_text(graph)
    assert parse_text(text) == graph, text
    assert to_text(parse_text(text)) == text


def test_the_committed_webnn_text_parses_to_the_sets_graph() -> None:
    """Checked by parsing, not by writing the graph again with the same writer."""
    graph = json.loads((BUNDLED / "decoder.webnn.json").read_bytes())
    parsed = parse_text((BUNDLED / "decoder.webnn").read_bytes())
    assert parsed == graph
    assert len(parsed["nodes"]) == 20 and list(parsed["outputs"]) == ["x_hat"]
    slice1 = parsed["nodes"][1]
    assert slice1["op"] == "slice" and slice1["options"]["sizes"][2] == {
        "dim": "latent_height",
        "mul": 2,
    }
    roundtrip(parsed)


def test_the_seeds_example_document() -> None:
    graph = parse_text(SEED_EXAMPLE)
    assert graph == {
        "format": "webnn-graph-json",
        "version": 2,
        "name": "example",
        "quantized": True,
        "inputs": {"input": {"dataType": "float32", "shape": [{"name": "batch", "maxSize": 8}, 4]}},
        "consts": {
            "bias": {"dataType": "float32", "shape": [], "init": {"kind": "scalar", "value": 0.5}},
            "bytes": {
                "dataType": "uint8",
                "shape": [4],
                "init": {"kind": "bytes", "data": [1, 2, 3, 4]},
            },
            "weight": {
                "dataType": "float32",
                "shape": [4, 4],
                "init": {"kind": "weights", "ref": "weight"},
            },
        },
        "nodes": [
            {
                "id": "sum",
                "op": "add",
                "inputs": ["input", "bias"],
                "options": {"metadata": {"kind": "example", "axes": [1]}},
                "outputs": None,
            },
            {
                "id": "left",
                "op": "split",
                "inputs": ["sum"],
                "options": {"splits": [2, 2], "axis": 1},
                "outputs": ["left", "right"],
            },
            {
                "id": "result",
                "op": "concat",
                "inputs": ["left", "right"],
                "options": {"axis": 1},
                "outputs": None,
            },
        ],
        "outputs": {"result": "result"},
    }
    roundtrip(graph)


CASES = {
    # the seed's shapes: a rank-0 scalar, static, bounded dynamic
    "shapes": 'webnn_graph "s" v2 { inputs { scalar: f32[]; static: f32[1, 128, 768]; '
    'dynamic: f32[dyn("batch", 8), dyn("sequence", 4096), 768]; } }',
    # every data type of the table
    "dtypes": 'webnn_graph "d" v1 { inputs { a: f32[1]; b: f16[1]; c: i4[1]; d: u4[1]; '
    "e: i32[1]; f: u32[1]; g: i64[1, 128]; h: u64[1]; i: i8[1]; j: u8[1]; } }",
    # the seed's constants, and one with no annotation (@weights of its own name)
    "consts": 'webnn_graph "c" v1 { consts { matrix: f32[4, 4] @weights("encoder.matrix"); '
    "epsilon: f32[] @scalar(0.00001); mask: u8[4] @bytes([1, 1, 0, 0]); plain: f32[2]; } }",
    # outputs, comments, identifiers with / $ . and every kind of option value
    "values": """# a comment
webnn_graph "v" v1 {  # after the header
  inputs { /in$put.0: f32[2]; }
  nodes {
    y = op(/in$put.0, s="x", n=-1.5e3, t=true, f=false, z=null, l=[], o={}, q={"a b": 1},
           id=some.name);
  }
  outputs { y; }
}""",
    "omitted blocks": 'webnn_graph "empty" v1 { }',
    "blocks in another order": 'webnn_graph "o" v1 { outputs { x; } inputs { x: f32[1]; } }',
}


@pytest.mark.parametrize("name", list(CASES))
def test_hand_written_cases_round_trip(name: str) -> None:
    graph = parse_text(CASES[name])
    roundtrip(graph)


def test_what_the_cases_read_as() -> None:
    shapes = parse_text(CASES["shapes"])["inputs"]
    assert shapes["scalar"]["shape"] == [] and shapes["static"]["shape"] == [1, 128, 768]
    assert shapes["dynamic"]["shape"][1] == {"name": "sequence", "maxSize": 4096}
    dtypes = parse_text(CASES["dtypes"])["inputs"]
    assert [d["dataType"] for d in dtypes.values()] == [
        "float32",
        "float16",
        "int4",
        "uint4",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "int8",
        "uint8",
    ]
    consts = parse_text(CASES["consts"])["consts"]
    assert consts["epsilon"]["init"] == {"kind": "scalar", "value": 0.00001}
    assert consts["plain"]["init"] == {"kind": "weights", "ref": "plain"}
    (node,) = parse_text(CASES["values"])["nodes"]
    assert node["inputs"] == ["/in$put.0"]
    assert node["options"] == {
        "s": "x",
        "n": -1500.0,
        "t": True,
        "f": False,
        "z": None,
        "l": [],
        "o": {},
        "q": {"a b": 1},
        "id": "some.name",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('webnn_graph "x" v3 { }', "line 1, column 17: expected the version, v1 or v2"),
        ('webnn_graph "x" v1 { inputs { a: f32[dyn("b", 2)]; } }', "only in a v2 input"),
        ('webnn_graph "x" v2 { consts { a: f32[dyn("b", 2)] @weights("a"); } }', "only in a v2"),
        ('webnn_graph "x" v1 { inputs { a: f64[1]; } }', "expected a data type"),
        ('webnn_graph "x" v1 { inputs { a: f32[1]; a: f32[1]; } }', "'a' is declared twice"),
        ('webnn_graph "x" v1 { inputs { } inputs { } }', "a second inputs block"),
        ('webnn_graph "x" v1 { nodes { y = add(x, 1); } }', "a positional literal"),
        ('webnn_graph "x" v1 { consts { a: u8[1] @bytes([256]); } }', "@bytes takes"),
        ('webnn_graph "x" v1 { consts { a: f32[] @scalar("1"); } }', "@scalar takes a number"),
        (
            'webnn_graph "x" v1 {\n  inputs { a: f32[1.5]; } }',
            "line 2, column 19: expected an integer",
        ),
        ('webnn_graph "x" v1 { } extra', "expected end"),
        ('webnn_graph "x" v1 { inputs { a: f32[1] } }', "expected ;"),
        ('webnn_graph "x" v1 { inputs { a: f32[1]; ', "found the end"),
        ('webnn_graph "x" v1 { inputs { a ! } }', "unexpected '!'"),
    ],
)
def test_what_does_not_read_says_where(text: str, message: str) -> None:
    with pytest.raises(WebNNTextError, match=r"line \d+, column \d+") as info:
        parse_text(text)
    assert message in str(info.value)
