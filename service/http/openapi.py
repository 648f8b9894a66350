"""The published OpenAPI document: FastAPI's, with the envelope's schema (the same one
docs/envelope.schema.json holds) and the decode answer's schema as components; every
operation's error answers (each status the error registry gives a code) described by the one
error body, ``{"error": {"code", "message"}, "request_id"}``; and OpenAPI links from the
operations that produce an id to those that take it (:data:`LINKS`: a decode to its reports and
its set, a report list to one report and to its next page, a set list or an install to one set
and its removal, a run report to reading it back, a policy version to reading it), which a
client and a stateful test follow."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from wai_dispatch.codec.envelope import json_schema
from wai_dispatch.dispatch import strictjson
from wai_dispatch.service.http.errors import STATUSES

#: The body of every error answer (service/http/errors.py's ``error_body``).
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "a stable code (docs/errors.md)"},
                "message": {"type": "string"},
            },
        },
        "request_id": {"type": "string"},
    },
}

#: (source method, path, status, link name, target method, path, parameters): each a value of
#: the source's answer a client passes to the target (OpenAPI runtime expressions).
LINKS: list[tuple[str, str, str, str, str, str, dict[str, str]]] = [
    ("post", "/v1/decode", "200", "GetReport", "get", "/v1/reports/{report_id}",
     {"report_id": "$response.body#/report_ids/0"}),
    ("post", "/v1/decode", "200", "ListReportsOfRequest", "get", "/v1/reports",
     {"request_id": "$response.body#/request_id"}),
    ("post", "/v1/decode", "200", "GetSet", "get", "/v1/sets/{digest}",
     {"digest": "$response.body#/set"}),
    ("get", "/v1/reports", "200", "GetReport", "get", "/v1/reports/{report_id}",
     {"report_id": "$response.body#/items/0/id"}),
    ("get", "/v1/reports", "200", "NextPage", "get", "/v1/reports",
     {"cursor": "$response.body#/next"}),
    ("get", "/v1/sets", "200", "GetSet", "get", "/v1/sets/{digest}",
     {"digest": "$response.body#/sets/0/digest"}),
    ("get", "/v1/sets", "200", "RemoveSet", "delete", "/v1/sets/{digest}",
     {"digest": "$response.body#/sets/0/digest"}),
    ("post", "/v1/sets", "200", "GetSet", "get", "/v1/sets/{digest}",
     {"digest": "$response.body#/digest"}),
    ("post", "/v1/sets", "200", "RemoveSet", "delete", "/v1/sets/{digest}",
     {"digest": "$response.body#/digest"}),
    ("delete", "/v1/sets/{digest}", "200", "GetRemovedSet", "get", "/v1/sets/{digest}",
     {"digest": "$response.body#/removed"}),
    ("post", "/v1/run-reports", "200", "GetRunReport", "get", "/v1/run-reports/{run_id}",
     {"run_id": "$response.body#/run_report", "sink": "$response.body#/sink"}),
    ("get", "/v1/run-reports/summary", "200", "GetRefusedRunReport", "get",
     "/v1/run-reports/{run_id}",
     {"run_id": "$response.body#/latest_refused/0/id",
      "sink": "$response.body#/latest_refused/0/sink"}),
    ("put", "/v1/policy", "200", "GetPolicyVersion", "get", "/v1/policy",
     {"version": "$response.body#/version"}),
    ("get", "/v1/policy/history", "200", "GetPolicyVersion", "get", "/v1/policy",
     {"version": "$response.body#/versions/0/version"}),
]  # fmt: skip


class Picture(BaseModel):
    width: int
    height: int
    format: str = "png"


class Decoded(BaseModel):
    """``POST /v1/decode``'s JSON answer."""

    request_id: str
    picture: Picture
    png: str = Field(description="the picture, PNG, base64")
    rgb_digest: str = Field(description="BLAKE3 of the RGB8 samples, row-major")
    set: str
    symbols_digest: str
    reports: list[dict[str, Any]] = Field(description="wai-neural-dispatch/1, primary first")
    report_ids: list[str]
    undecodable: list[dict[str, str]] = Field(
        description="parts this sink cannot decode at all (an unknown capability), skipped"
    )


def _components() -> dict[str, Any]:
    envelope = json_schema()
    envelope.pop("$schema", None)
    defs = envelope.pop("$defs", {})
    text = json.dumps({"Envelope": envelope, **defs}).replace('"#/$defs/', '"#/components/schemas/')
    out: dict[str, Any] = strictjson.loads(text)
    decoded = Decoded.model_json_schema(ref_template="#/components/schemas/{model}")
    out.update(decoded.pop("$defs", {}))
    out["Decoded"] = decoded
    return out


def _error_answers(schema: dict[str, Any]) -> None:
    """Every status an error is answered with, on every operation, with the error body
    (FastAPI's own 422 schema is not what this service answers)."""
    statuses = sorted({status for _, status in STATUSES})
    answer = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for status in statuses:
                entry = responses.setdefault(str(status), {})
                entry.setdefault("description", HTTPStatus(status).phrase)
                entry["content"] = answer
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)


def _links(schema: dict[str, Any]) -> None:
    paths = schema.get("paths", {})
    for method, path, status, name, to_method, to_path, parameters in LINKS:
        source = paths.get(path, {}).get(method)
        target = paths.get(to_path, {}).get(to_method)
        if source is None or target is None:  # an operation this app leaves out
            continue
        answer = source.setdefault("responses", {}).setdefault(status, {"description": "OK"})
        answer.setdefault("links", {})[name] = {
            "operationId": target["operationId"],
            "parameters": dict(parameters),
        }


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(_components())
            _error_answers(schema)
            _links(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
