"""The auth dependency every route declares: a bearer token of at least a role.

``Depends(require(Role.operator))`` answers 401 (``token_missing``, ``token_unknown``) without a
live token and 403 (``role_forbidden``) when the token's role is below the one asked for; it
gives the route the :class:`Principal` (its name is the sink a report is filed under).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from wai_dispatch.service.http.deps import TokensDep
from wai_dispatch.service.http.errors import RoleForbidden, TokenMissing, TokenUnknown
from wai_dispatch.service.store.bearer import Principal, Role

_bearer = HTTPBearer(auto_error=False, description="a token from `wai-dispatch tokens create`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def require(role: Role) -> Callable[..., Awaitable[Principal]]:
    """The dependency for a route open to ``role`` and above."""

    async def dependency(
        request: Request,
        tokens: TokensDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        if credentials is None or credentials.scheme.lower() != "bearer":
            raise TokenMissing(
                "this route needs 'Authorization: Bearer <token>'",
                headers=_CHALLENGE,
            )
        secret = credentials.credentials.strip()
        # the view's dictionary on the event loop; a lookup that may read the store, in a
        # thread (a plain `def` dependency would take a thread hop on every request)
        if tokens.needs_store(secret):
            principal = await run_in_threadpool(tokens.lookup, secret)
        else:
            principal = tokens.lookup(secret)
        if principal is None:
            raise TokenUnknown(
                "the bearer token is not a live token",
                headers=_CHALLENGE,
            )
        request.scope.setdefault("state", {})["principal"] = principal  # for the request log
        if principal.role < role:
            raise RoleForbidden(
                f"this route needs the {role.name} role; the token is a {principal.role.name}'s",
            )
        return principal

    return dependency
