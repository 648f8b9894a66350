"""``GET /page/…``: the browser page (docs/page.md), served by the service.

The page's routes are public, as a page must be: its static files, the bundled samples, and the
files of installed sets that a decode in the page reads (each verified by the store), the native
reference decode of a bundled sample, and the WebGPU path's kernel plans. They are kept out of
the OpenAPI schema: they are the page's, not the API's. ``WAI_PAGE=false`` turns them off. A
Content-Security-Policy lets the page reach nothing but this service (no CDN: it works offline).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from wai_dispatch.dispatch.codes import ErrorCode
from wai_dispatch.service.http.deps import DecoderDep, SettingsDep
from wai_dispatch.service.http.errors import ServiceError

router = APIRouter(tags=["page"], include_in_schema=False)

#: The page reaches nothing but this service: its own scripts, styles and routes.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def _site(request: Request, decoder: DecoderDep, settings: SettingsDep) -> Any:
    """The page's site over this process's Decoder, made on first use and kept."""
    from wai_dispatch.service.web.page_site import PageSite

    if not settings.page:
        raise ServiceError(
            "the browser page is turned off here (WAI_PAGE)", code=ErrorCode.NOT_FOUND
        )
    state = request.app.state
    site = getattr(state, "page_site", None)
    if site is None:
        site = PageSite(decoder)
        state.page_site = site
    return site


@router.get("/page")
async def page_root(request: Request) -> RedirectResponse:
    return RedirectResponse(str(request.url_for("page", rel="")), status_code=308)


@router.get("/page/{rel:path}")
async def page(rel: str, request: Request, site: Annotated[Any, Depends(_site)]) -> Response:
    query = request.url.query
    res = await run_in_threadpool(site.get, f"{rel}?{query}" if query else rel)
    return Response(res.body, status_code=res.status, media_type=res.media_type, headers=HEADERS)
