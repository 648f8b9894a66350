"""The operator dashboard (``dashboard_files/``) at ``/dashboard/``: static files with no login
of their own (the page sends an operator token to the API); its icon is also ``/favicon.ico``.
``/dashboard/limits.json`` gives the page what the API takes for each key of a shared URL, read
from the API's own schema, so each limit is declared once, by its route."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from wai_dispatch.service.http.errors import RouteNotFound
from wai_dispatch.service.web.static import WebAssets

#: Each key of a dashboard URL that is sent to the API as is → the parameters it is sent as
#: (dashboard.js); the menus' keys (range, sort, …) are checked against the page's own menus.
SENT_AS: dict[str, tuple[str, ...]] = {
    "class": ("sink_class",),
    "sink": ("sink",),
    "capability": ("capability",),
    "set": ("set",),
    "q": ("q",),
    "prefix": ("prefix",),
    "run": ("run_report", "run_id"),
    "run_sink": ("sink",),
    "decode": ("report_id",),
}


def dashboard_dir() -> Path:
    """The dashboard's folder inside the installed package."""
    return Path(str(resources.files("wai_dispatch.service.web").joinpath("dashboard_files")))


def _strings(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The string forms a parameter's schema admits (``str | None`` is an ``anyOf``)."""
    forms = schema.get("anyOf", [schema])
    return [f for f in forms if f.get("type") == "string"]


def url_limits(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """For each key of :data:`SENT_AS`: ``max_length`` (the tightest of the GET parameters it
    is sent as) and ``patterns`` (all of theirs), from the OpenAPI ``schema``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for operations in schema.get("paths", {}).values():
        for parameter in operations.get("get", {}).get("parameters", []):
            forms = _strings(parameter.get("schema", {}))
            found.setdefault(parameter["name"], []).extend(forms)
    limits: dict[str, dict[str, Any]] = {}
    for key, names in SENT_AS.items():
        forms = [f for name in names for f in found.get(name, [])]
        lengths = [f["maxLength"] for f in forms if "maxLength" in f]
        patterns = sorted({f["pattern"] for f in forms if "pattern" in f})
        limits[key] = {"max_length": min(lengths) if lengths else None, "patterns": patterns}
    return limits


def install(app: FastAPI) -> None:
    @app.get("/dashboard", include_in_schema=False)
    async def dashboard_root(request: Request) -> RedirectResponse:
        return RedirectResponse(str(request.url_for("dashboard", path="/")), status_code=308)

    icon = (dashboard_dir() / "favicon.ico").read_bytes()

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(
            icon, media_type="image/x-icon", headers={"cache-control": "public, max-age=86400"}
        )

    made: list[bytes] = []  # the schema is whole only once every route is in: made at first ask

    @app.get("/dashboard/limits.json", include_in_schema=False)
    async def dashboard_limits() -> Response:
        if not made:
            made.append(json.dumps(url_limits(app.openapi()), sort_keys=True).encode())
        return Response(
            made[0], media_type="application/json", headers={"cache-control": "no-cache"}
        )

    assets = WebAssets(str(dashboard_dir()), missing=RouteNotFound)
    app.mount("/dashboard", assets, name="dashboard")
