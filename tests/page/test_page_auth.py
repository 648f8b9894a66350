"""Issue 16: every ``/page/`` route without a token answers 401 or serves only static files.

The routes are enumerated from the app itself (``app.routes``, through FastAPI's
``iter_route_contexts``), so a route added under ``/page`` later is covered without touching
this file: each data route answers 401 ``token_missing`` without a token and ``token_unknown``
with a dead one, before it reads a parameter or does any work; ``/page`` redirects to ``/page/``;
and the one mount is the page's static files (``page_files/``), serving exactly those files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Mount

from wai_dispatch.service.web.page import page_dir
from wai_dispatch.service.web.static import SERVED, WebAssets

pytestmark = pytest.mark.anyio
_PARAM = re.compile(r"\{([^}:]+)(?::[^}]+)?\}")


def _filled(path: str) -> str:
    """A concrete URL for a route's path: a digest where one is asked for, else a name."""
    return _PARAM.sub(lambda m: "0" * 64 if m.group(1) == "digest" else "x.json", path)


def page_routes(app: Any) -> list[Any]:
    """Every route of ``app`` under ``/page`` (the routers included, flattened)."""
    found = []
    for context in iter_route_contexts(app.routes):
        path = context.path or ""
        if path == "/page" or path.startswith("/page/"):
            found.append(context)
    return found


def _client(app: Any, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers=headers
    )


async def test_every_page_route_needs_a_token_or_is_static(app: Any) -> None:
    routes = page_routes(app)
    apis = [r for r in routes if isinstance(r.original_route, APIRoute)]
    redirects = [r for r in apis if r.name == "page_root"]  # the one public route: /page → /page/
    data = [r for r in apis if r not in redirects]
    mounts = [r for r in routes if isinstance(r.original_route, Mount)]
    assert [r.path for r in redirects] == ["/page"]
    assert len(routes) == len(apis) + len(mounts)  # nothing under /page but these three kinds
    assert len(data) >= 10  # the samples, corpus, sets, plan and reference routes
    seen: dict[str, tuple[int, str]] = {}
    async with _client(app) as anon, _client(app, {"Authorization": "Bearer dead"}) as dead:
        for route in data:
            for method in sorted(route.methods or {"GET"}):
                url = _filled(route.path)
                res = await anon.request(method, url, params={"shape": "1,192,65535,65535"})
                error = res.json()["error"]
                assert (res.status_code, error["code"]) == (401, "token_missing"), url
                assert res.headers["www-authenticate"] == "Bearer"
                assert "Bearer" in error["message"]
                seen[f"{method} {route.path}"] = (res.status_code, error["code"])
                res = await dead.request(method, url)
                assert (res.status_code, res.json()["error"]["code"]) == (401, "token_unknown")
        redirect = await anon.get("/page", follow_redirects=False)
        assert redirect.status_code == 308
        assert redirect.headers["location"] == "http://testserver/page/"
    assert {"GET /page/reference/{name}", "GET /page/sets/{digest}/wgsl/plan"} <= set(seen)
    (mount,) = mounts
    assert mount.path == "/page"
    assets = mount.original_route.app
    assert isinstance(assets, WebAssets)
    assert Path(str(assets.directory)).resolve() == page_dir().resolve()
    assert not assets.follow_symlink


async def test_the_static_mount_serves_only_page_files(app: Any) -> None:
    """Without a token: every web asset under page_files/ as it is on disk; nothing else (the
    package's Python files, files reached by climbing out, dotfiles) is served."""
    root = page_dir()
    files = [p for p in root.rglob("*") if p.is_file()]
    assert not [p for p in root.rglob("*") if p.is_symlink()]  # nothing links out of the folder
    served = [p for p in files if p.suffix in SERVED and not p.name.startswith(".")]
    assert len(served) >= 10
    async with _client(app) as anon:
        for path in served:
            res = await anon.get(f"/page/{path.relative_to(root).as_posix()}")
            assert res.status_code == 200, path
            assert res.content == path.read_bytes(), path
            assert res.headers["content-security-policy"].startswith("default-src 'none'")
        for url in [
            "/page/../page.py",
            "/page/..%2Fpage.py",
            "/page/js%2F..%2F..%2Fpage_data.py",
            "/page/%2e%2e/%2e%2e/static.py",
            "/page/__init__.py",
            "/page/.hidden",
            "/page/vendor/../../page.py",
            "/page//etc/passwd",
        ]:
            res = await anon.get(url)
            assert res.status_code == 404, url
            assert res.json()["error"]["code"] in {"page_not_found", "not_found"}, url
