"""Serves the operator dashboard (``service/web/dashboard_files/``) at ``/dashboard/``: static
files, no login of their own (the page asks for an operator token and sends it to the API), and a
Content-Security-Policy that lets the page reach nothing but this service."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from wai_dispatch.service.web.dashboard_files import files

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
]


class _Dashboard(StaticFiles):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await super().__call__(scope, receive, with_headers)


def install(app: FastAPI) -> None:
    folder = Path(str(files()))

    @app.get("/dashboard", include_in_schema=False)
    async def dashboard_root() -> RedirectResponse:
        return RedirectResponse("/dashboard/", status_code=308)

    app.mount("/dashboard/", _Dashboard(directory=folder, html=True), name="dashboard")
