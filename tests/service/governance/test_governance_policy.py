"""The model policy (wai-model-policy/1): loading, the schema, errors that point at the line,
and the history kept in the data directory."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from wai_dispatch.dispatch.tokens import Tier
from wai_dispatch.service.governance import (
    PolicyInvalid,
    PolicyMalformed,
    PolicyNotSet,
    load_policy,
)
from wai_dispatch.service.governance.policy import MAX_POLICY_BYTES, schema

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "policy.yaml"
A, B = "a" * 64, "b" * 64


def test_the_documented_example_loads() -> None:
    policy = load_policy(EXAMPLE.read_text())
    assert sorted(policy.classes) == ["archive", "kiosk"]
    kiosk = policy.classes["kiosk"]
    assert kiosk.sinks == {"kiosk-01", "kiosk-02"}
    assert kiosk.tiers == {Tier.NONE}
    assert kiosk.allows_set("wai.neural.bmshj2018", A)
    assert not kiosk.allows_set("wai.neural.int_synth", A)  # digest allowed for one capability
    archive = policy.classes["archive"]
    assert archive.allows_set("wai.neural.int_synth", B)  # a bare digest: any capability
    assert policy.class_of("archive-01") is archive
    assert policy.class_of("nobody") is None


def test_json_is_read_too_and_gives_the_same_policy() -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    a = load_policy(EXAMPLE.read_text())
    b = load_policy(json.dumps(doc, indent=1))
    assert a.classes == b.classes


def test_the_schema_is_the_one_shipped_and_accepts_the_example() -> None:
    import yaml

    jsonschema.Draft202012Validator.check_schema(schema())
    jsonschema.validate(yaml.safe_load(EXAMPLE.read_text()), schema())


def _bad(text: str) -> str:
    with pytest.raises((PolicyInvalid, PolicyMalformed)) as info:
        load_policy(text, source="p.yaml")
    return f"{info.value.code}: {info.value.message}"


HEAD = "format: wai-model-policy/1\nclasses:\n  k:\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HEAD + "    sinks: [s]\n    tiers: [full]\n    sets: []\n",
            "policy_invalid: p.yaml:5:13: classes.k.tiers[0]: 'full' is not one of "
            "['none', 'entropy-consistency', 'decode-equivalence']",
        ),
        (
            HEAD + "    sinks: [s]\n    tiers: [none]\n    sets:\n      - digest: ABC\n",
            "policy_invalid: p.yaml:7:9: classes.k.sets[0]: a set is {digest} or "
            "{capability, digests}, with 64 lowercase hex digits each",
        ),
        (
            HEAD + "    sinks: [s]\n    tiers: [none]\n",
            "policy_invalid: p.yaml:4:5: classes.k: 'sets' is a required property",
        ),
        (
            HEAD + "    sinks: [s]\n    tiers: [none]\n    sets: []\n    colour: red\n",
            "policy_invalid: p.yaml:4:5: classes.k: Additional properties are not allowed "
            "('colour' was unexpected)",
        ),
        (
            "format: wai-model-policy/2\nclasses: {}\n",
            "policy_invalid: p.yaml:1:9: format: 'wai-model-policy/1' was expected (and 1 more)",
        ),
        (
            HEAD + "    sinks: [s]\n    tiers: [none]\n    sets: []\n"
            "  j:\n    sinks: [t, s]\n    tiers: [none]\n    sets: []\n",
            "policy_invalid: p.yaml:8:16: sink 's' is in class 'k' already; "
            "a sink belongs to one class",
        ),
        (
            HEAD + "    sinks: [s]\n    sinks: [t]\n",
            "policy_malformed: p.yaml:5:5: the key 'sinks' is written twice",
        ),
        (
            HEAD + "    sinks: &x [s]\n    tiers: *x\n    sets: []\n",
            "policy_malformed: p.yaml:4:12: anchors and aliases are not allowed",
        ),
        (
            "format: [unclosed\n",
            "policy_malformed: p.yaml:2:1: expected ',' or ']', but got '<stream end>'",
        ),
        ("", "policy_malformed: p.yaml:1:1: the document is empty"),
        (
            "- a\n- b\n",
            "policy_invalid: p.yaml:1:1: (document): ['a', 'b'] is not of type 'object'",
        ),
    ],
)
def test_a_bad_policy_is_refused_at_its_line(text: str, expected: str) -> None:
    assert _bad(text) == expected


def test_size_and_encoding_are_bounded() -> None:
    assert _bad("#" * (MAX_POLICY_BYTES + 1)).startswith("policy_malformed: p.yaml: 1048577 bytes")
    with pytest.raises(PolicyMalformed, match="not UTF-8"):
        load_policy(b"format: \xff\n")


@pytest.fixture
def history(report_store: Any) -> Any:
    """The policy's history on a fresh report store (SQLite)."""
    from wai_dispatch.service.store.policies import PolicyStore

    return PolicyStore(report_store)


def test_history_keeps_every_version_with_who_and_when(history: Any) -> None:
    with pytest.raises(PolicyNotSet):
        history.current()
    text = EXAMPLE.read_text()
    v1 = history.set(text, by="ana", now_ms=1000)
    v2 = history.set(text.replace("kiosk-02", "kiosk-03"), by="ben", now_ms=2000)
    assert (v1.version, v2.version) == (1, 2)
    assert [(v.version, v.set_by, v.set_ms) for v in history.versions()] == [
        (1, "ana", 1000),
        (2, "ben", 2000),
    ]
    assert history.current().sha256 == v2.sha256 != v1.sha256
    assert history.current().text == text.replace("kiosk-02", "kiosk-03")
    assert "kiosk-02" in history.get(1).policy().classes["kiosk"].sinks
    with pytest.raises(PolicyNotSet):
        history.get(3)
    with pytest.raises(PolicyInvalid):
        history.set("format: wai-model-policy/1\nclasses: {}\n", by="eve")
    assert len(history.versions()) == 2  # a bad policy changes nothing


def test_concurrent_setters_take_distinct_versions(history: Any) -> None:
    text = EXAMPLE.read_text()
    threads = [
        threading.Thread(target=history.set, args=(text,), kwargs={"by": f"u{i}"}) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = history.versions()
    assert [v.version for v in versions] == list(range(1, 9))
    assert sorted(v.set_by for v in versions) == [f"u{i}" for i in range(8)]
