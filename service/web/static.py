"""Static web assets (the dashboard's and the page's folders) through Starlette's ``StaticFiles``:
only the kinds of file a page loads, each with a CSP that reaches nothing but this service, and
a missing file as a typed error like every other refusal."""

from __future__ import annotations

from pathlib import PurePosixPath

from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from wai_dispatch.dispatch.errors import WaiError

#: A page of this service reaches nothing but this service: its own scripts, styles and routes.
CSP = (
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
#: What a page loads: documents, modules, styles, its icon, the vendored libraries' licence texts
#: and ONNX Runtime Web's WebAssembly, both of its builds (``application/wasm``; the CSP's
#: ``'wasm-unsafe-eval'`` lets the page compile them, and nothing else: WebGPU itself needs no
#: CSP directive).
SERVED = frozenset(
    {".html", ".js", ".mjs", ".css", ".json", ".md", ".LICENSE", ".ico", ".wasm", ""}
)


class WebAssets(StaticFiles):
    """A folder of web assets; anything else in it (a Python file, a dotfile) is not served."""

    def __init__(self, directory: str, *, missing: type[WaiError]) -> None:
        super().__init__(directory=directory, html=True)
        self.missing = missing

    async def get_response(self, path: str, scope: Scope) -> Response:
        name = PurePosixPath(path).name
        if name.startswith(".") or PurePosixPath(name).suffix not in SERVED:
            raise self.missing(f"no such file {path[:80]!r}")
        try:
            return await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code == 404:
                raise self.missing(f"no such file {path[:80]!r}") from None
            raise

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extra = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await super().__call__(scope, receive, with_headers)
