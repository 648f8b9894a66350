"""The browser page's errors (service/web/): its static tree, its data routes and the page's
own fetches (service/web/page_files/js/decode.js). Each names its stable ``code`` and, as its
docstring, the code's meaning."""

from __future__ import annotations

from wai_dispatch.dispatch.errors import InvalidInput, Malformed, NotFound


class PageNotFound(NotFound):
    """a page file, sample or set route the page's site does not hold"""

    code = "page_not_found"


class PageBadRequest(Malformed):
    """a page route's query (a latent shape, the browser's limits) that does not read"""

    code = "page_bad_request"


class PageFetchFailed(InvalidInput):
    """the page could not read a file from the service that serves it (names the route; raised
    by the page's script, in the browser)"""

    code = "page_fetch_failed"
