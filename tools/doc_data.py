"""A ``json`` or ``yaml`` block of the docs held to the project's own readers: parsed (a fragment
of members is read inside ``{…}``), then validated by the reader its ``kind`` / ``format`` (or
its members) names (:func:`check_data`); anything else is only parsed. ``aaaa…aaaa`` stands
for a digest's 64 digits; an error about any other value with ``…`` (a placeholder) does not
count."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import ValidationError

from wai_dispatch.codec.envelope import EnvelopeError, parse_json
from wai_dispatch.codec.sets import Manifest
from wai_dispatch.dispatch import InvalidReport, Report
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.paths.waiops.errors import WaiOpsError
from wai_dispatch.paths.waiops.program import parse_program
from wai_dispatch.service.governance.errors import RunReportMalformed
from wai_dispatch.service.governance.judge import DecodeVerdict, Reason, Rule, Verdict
from wai_dispatch.service.governance.policy import load_policy
from wai_dispatch.service.governance.runreport import parse_run_report
from wai_dispatch.setfacts.facts import SetFacts
from wai_dispatch.tools.doc_blocks import Block

ROOT = Path(__file__).resolve().parents[1]


def _parse(block: Block) -> tuple[Any, str | None]:
    text = _digests(block.text)
    if block.info == "yaml":
        try:
            return yaml.safe_load(text), None
        except yaml.YAMLError as exc:
            return None, f"not YAML: {' '.join(str(exc).split())}"
    try:
        return json.loads(text), None
    except ValueError as exc:
        try:
            return json.loads("{" + text + "}"), None
        except ValueError:
            return None, f"not JSON (nor members of an object): {exc}"


_DIGEST = re.compile(r"\b([0-9a-f])\1{3}…\1{4}\b")


def _digests(text: str) -> str:
    """``aaaa…aaaa`` (one hex digit, four times, around ``…``) as the 64 digits it stands for."""
    return _DIGEST.sub(lambda m: m.group(1) * 64, text)


def _placeholder(value: object) -> bool:
    return isinstance(value, str) and "…" in value


def _refused(read: Callable[[], object], errors: type[Exception], what: str) -> list[str]:
    """``[what: the error]`` when ``read()`` raises one of ``errors``, else nothing."""
    try:
        read()
    except errors as exc:
        return [f"{what}: {exc}"]
    return []


def _pydantic(model: Any, obj: object) -> list[str]:
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        return [
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors(include_url=False)
            if not _placeholder(e.get("input"))
        ]
    return []


def _envelope(obj: Any, text: str) -> list[str]:
    problems = []
    schema = json.loads((ROOT / "docs" / "envelope.schema.json").read_text(encoding="utf-8"))
    for err in jsonschema.Draft202012Validator(schema).iter_errors(obj):
        problems.append(f"envelope.schema.json: {err.message}")
    try:
        parse_json(text)
    except EnvelopeError as exc:
        problems.append(f"codec.parse_json refuses it: {exc}")
    return problems


def _verdict(obj: Any) -> list[str]:
    decode = DecodeVerdict(0, None, None, (Reason(Rule.SINK_UNCLASSIFIED, ""),))
    want = Verdict("r", "s", None, "0" * 64, 1, (decode,)).to_json()
    problems = []
    if set(obj) != set(want):
        problems.append(f"members {sorted(obj)}, a verdict has {sorted(want)}")
    for n, d in enumerate(obj.get("decodes", [])):
        if set(d) != set(want["decodes"][0]):
            problems.append(f"decodes[{n}]: members {sorted(d)}, not {sorted(want['decodes'][0])}")
        for reason in d.get("reasons", []):
            if set(reason) != {"rule", "message"} or reason["rule"] not in set(map(str, Rule)):
                problems.append(f"decodes[{n}]: {reason} is no reason ({sorted(map(str, Rule))})")
    return problems


def _compressed(obj: Any) -> list[str]:
    want = {"format": str, "model": str, "quality": int, "shape": list, "strings": list}
    return [
        f"{k}: {type(obj.get(k)).__name__}, not {t.__name__}"
        for k, t in want.items()
        if not isinstance(obj.get(k), t) or (t is int and isinstance(obj.get(k), bool))
    ] + ([f"members {sorted(obj)}, not {sorted(want)}"] if set(obj) != set(want) else [])


def _waiops(obj: Any) -> list[str]:
    try:
        parse_program(obj, {})
    except WaiOpsError as exc:
        message = str(exc)
        if "tensor" in message and ("missing" in message or "no tensor" in message):
            return []  # the structure passed; the weights are not in a doc
        return [f"not a valid wai-ops/1 program: {message}"]
    return []


def check_data(block: Block) -> tuple[str, list[str]]:
    """``("validated" | "parsed", problems)``."""
    obj, problem = _parse(block)
    if problem is not None:
        return "parsed", [problem]
    if not isinstance(obj, dict):
        return "parsed", []
    kind = obj.get("kind") or obj.get("format")
    if kind == "wai-neural-dispatch/1":
        return "validated", _refused(
            lambda: Report.from_json(obj), InvalidReport, "not a valid wai-neural-dispatch/1 report"
        )
    if kind == "wai-envelope/1":
        return "validated", _envelope(obj, _digests(block.text))
    if kind == "wai-run-report/1":
        return "validated", _refused(
            lambda: parse_run_report(obj), RunReportMalformed, "not a valid run report"
        )
    if kind == "wai-run-verdict/1":
        return "validated", _verdict(obj)
    if kind == "wai-model-policy/1":
        text = _digests(block.text)
        return "validated", _refused(
            lambda: load_policy(text, source="the block"), WaiError, "not a valid model policy"
        )
    if kind == "compressai-compress/1":
        return "validated", _compressed(obj)
    if kind == "wai-ops/1":
        return "validated", _waiops(obj)
    if "capability" in obj and "files" in obj:
        return "validated", _pydantic(Manifest, obj)
    if set(obj) == {"programs"}:
        return "validated", _pydantic(SetFacts, obj)
    return "parsed", []
