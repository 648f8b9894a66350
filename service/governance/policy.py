"""The operator's model policy (``wai-model-policy/1``, docs/policy.md): :func:`load_policy`
reads YAML or JSON, validates it against ``policy.schema.json`` and refuses a bad policy with a
typed error that names the line (``policy.yaml:12:9: …``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from wai_dispatch.dispatch import strictjson
from wai_dispatch.dispatch.tokens import Tier
from wai_dispatch.service.governance.errors import PolicyInvalid, PolicyMalformed
from wai_dispatch.service.governance.yamlmarks import MarkedError, dotted, load_marked, where

FORMAT = "wai-model-policy/1"
MAX_POLICY_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class SetRule:
    """One entry of a class's ``sets``: a digest of any capability, or a capability with the
    digests of it the class may run."""

    capability: str | None
    digests: frozenset[str]

    def allows(self, capability: str, digest: str) -> bool:
        return digest in self.digests and self.capability in (None, capability)


@dataclass(frozen=True, slots=True)
class SinkClass:
    name: str
    sinks: frozenset[str]
    tiers: frozenset[Tier]
    sets: tuple[SetRule, ...]

    def allows_set(self, capability: str, digest: str) -> bool:
        return any(rule.allows(capability, digest) for rule in self.sets)


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated policy; ``text`` is the document as the operator wrote it, ``sha256`` its
    digest (the history records both)."""

    classes: dict[str, SinkClass]
    text: str
    sha256: str

    def class_of(self, sink: str) -> SinkClass | None:
        for cls in self.classes.values():
            if sink in cls.sinks:
                return cls
        return None


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of ``wai-model-policy/1``, shipped in the package."""
    text = resources.files(__package__).joinpath("policy.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = strictjson.loads(text)
    return loaded


def load_policy(data: str | bytes, *, source: str = "policy") -> Policy:
    """Parse and validate a policy; :class:`PolicyMalformed` or :class:`PolicyInvalid` says
    where (``source:line:column``) and what is wrong."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyMalformed(f"{source}: {len(raw)} bytes, over the {MAX_POLICY_BYTES} allowed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyMalformed(f"{source}: not UTF-8 (byte {exc.start})") from None
    try:
        doc, marks = load_marked(text)
    except MarkedError as exc:
        raise PolicyMalformed(f"{source}:{exc.line}:{exc.column}: {exc}") from None
    _validate(doc, marks, source)
    classes: dict[str, SinkClass] = {}
    seen: dict[str, str] = {}
    for name, body in doc["classes"].items():
        for i, sink in enumerate(body["sinks"]):
            if sink in seen:
                line, col = where(marks, ("classes", name, "sinks", i))
                raise PolicyInvalid(
                    f"{source}:{line}:{col}: sink {sink!r} is in class {seen[sink]!r} already; "
                    "a sink belongs to one class"
                )
            seen[sink] = name
        rules = tuple(
            SetRule(None, frozenset([s["digest"]]))
            if "digest" in s
            else SetRule(s["capability"], frozenset(s["digests"]))
            for s in body["sets"]
        )
        tiers = frozenset(Tier(t) for t in body["tiers"])
        classes[name] = SinkClass(name, frozenset(body["sinks"]), tiers, rules)
    return Policy(classes, text, hashlib.sha256(raw).hexdigest())


def _validate(doc: Any, marks: dict[Any, tuple[int, int]], source: str) -> None:
    import jsonschema  # only where a policy is read

    errors = sorted(
        jsonschema.Draft202012Validator(schema()).iter_errors(doc),
        key=lambda err: (*where(marks, tuple(err.absolute_path)), err.message),
    )
    if not errors:
        return
    first = errors[0]
    line, col = where(marks, tuple(first.absolute_path))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    message = _brief(first)
    raise PolicyInvalid(
        f"{source}:{line}:{col}: {dotted(tuple(first.absolute_path))}: {message}{more}"
    )


def _brief(err: Any) -> str:
    """The schema's message, shortened where it would quote a whole sub-document."""
    if err.validator == "oneOf":
        return "a set is {digest} or {capability, digests}, with 64 lowercase hex digits each"
    message: str = err.message
    return message if len(message) <= 200 else message[:197] + "..."


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    """One version of the policy as kept: its number, who set it and when, and its text."""

    version: int
    set_by: str
    set_ms: int  # Unix time, milliseconds
    text: str
    sha256: str

    def policy(self) -> Policy:
        return load_policy(self.text, source=f"policy v{self.version}")

    def to_json(self, *, with_text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "set_by": self.set_by,
            "set_ms": self.set_ms,
            "sha256": self.sha256,
        }
        if with_text:
            out["text"] = self.text
        return out
