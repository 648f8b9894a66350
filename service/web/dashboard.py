"""Serves the operator dashboard (``service/web/dashboard_files/``: one page, its script and
style, its icon and the vendored uPlot) at ``/dashboard/``: static files with no login of their
own (the page asks for an operator token and sends it to the API), through
:class:`~service.web.static.WebAssets` (web assets only, and a Content-Security-Policy that lets
the page reach nothing but this service). The icon is also ``/favicon.ico``, which every
browser asks the service's root for: answered, never a request error."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from wai_dispatch.service.http.codes import HttpCode
from wai_dispatch.service.web.static import WebAssets

__all__ = ["dashboard_dir", "install"]


def dashboard_dir() -> Path:
    """The dashboard's folder inside the installed package."""
    return Path(str(resources.files("wai_dispatch.service.web").joinpath("dashboard_files")))


def install(app: FastAPI) -> None:
    @app.get("/dashboard", include_in_schema=False)
    async def dashboard_root(request: Request) -> RedirectResponse:
        return RedirectResponse(str(request.url_for("dashboard", path="/")), status_code=308)

    icon = (dashboard_dir() / "favicon.ico").read_bytes()

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(icon, media_type="image/x-icon",
                        headers={"cache-control": "public, max-age=86400"})  # fmt: skip

    assets = WebAssets(str(dashboard_dir()), missing=HttpCode.NOT_FOUND)
    app.mount("/dashboard", assets, name="dashboard")
