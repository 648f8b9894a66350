"""The published OpenAPI document: FastAPI's, with the envelope's schema (the same one
docs/envelope.schema.json holds) and the decode answer's schema as components."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from wai_dispatch.codec.envelope import json_schema
from wai_dispatch.dispatch import strictjson


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
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
