"""What a request reaches, as FastAPI dependencies: the :class:`Service` the lifespan opened
(``app.state.service``, read here and nowhere else by a route), and each of its parts, typed.

A route declares what it needs: ``decoder: DecoderDep``, ``store: ReportStoreDep``, …, and the
auth every route declares, a bearer token of at least a role: ``Depends(require(Role.operator))``
answers 401 (``token_missing``, ``token_unknown``) without a live token and 403
(``role_forbidden``) when the token's role is below the one asked for; it gives the route the
token's :class:`~service.store.bearer.Principal` (its name is the sink a report is filed under).
Each is ``async``: the parts only read an attribute, and FastAPI runs a plain ``def`` dependency
in a thread of its pool, a hop per dependency per request (docs/performance.md's route profile).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.warm import Warmup
from wai_dispatch.service.http.admission import Admission
from wai_dispatch.service.http.errors import RoleForbidden, TokenMissing, TokenUnknown
from wai_dispatch.service.http.metrics import Metrics
from wai_dispatch.service.settings import Settings
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.bearer import Principal, Role, TokenCache
from wai_dispatch.service.store.policies import PolicyStore
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.report_store import ReportStore
from wai_dispatch.service.store.request_errors import ErrorLog
from wai_dispatch.service.store.retention import Pruner
from wai_dispatch.service.store.setsync import SetSync


@dataclass
class Service:
    """Everything the service holds while it runs: its settings, the one :class:`Decoder`
    (its set store, its adapters and their program cache), the report store, the recorder,
    the token cache, admission, metrics, the policies, the warming, the set registry's sync and
    the retention thread, the request errors' writer and the roll-ups' aggregator."""

    settings: Settings
    decoder: Decoder
    report_store: ReportStore
    recorder: Recorder
    tokens: TokenCache
    admission: Admission
    metrics: Metrics
    policies: PolicyStore
    warmup: Warmup
    sets: SetSync
    pruner: Pruner | None = None  # retention (service/store/retention.py); None: keep all
    errors: ErrorLog | None = None  # 4xx answers, noted for the dashboard (best-effort)
    aggregator: Aggregator | None = None  # the roll-ups' fold (service/store/aggregator.py)

    def close(self) -> None:
        self.sets.close()
        self.admission.close()
        if self.pruner is not None:
            self.pruner.close()
        self.recorder.close()
        if self.aggregator is not None:
            self.aggregator.close()
        if self.errors is not None:
            self.errors.close()
        self.report_store.dispose()
        self.metrics.close()


async def get_service(request: Request) -> Service:
    """The running service (set by the app's lifespan)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


async def _decoder(service: ServiceDep) -> Decoder:
    return service.decoder


async def _report_store(service: ServiceDep) -> ReportStore:
    return service.report_store


async def _tokens(service: ServiceDep) -> TokenCache:
    return service.tokens


async def _metrics(service: ServiceDep) -> Metrics:
    return service.metrics


async def _policies(service: ServiceDep) -> PolicyStore:
    return service.policies


async def _sets(service: ServiceDep) -> SetSync:
    return service.sets


SetsDep = Annotated[SetSync, Depends(_sets)]
DecoderDep = Annotated[Decoder, Depends(_decoder)]
ReportStoreDep = Annotated[ReportStore, Depends(_report_store)]
TokensDep = Annotated[TokenCache, Depends(_tokens)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
PoliciesDep = Annotated[PolicyStore, Depends(_policies)]


# --- auth: a bearer token of at least a role --------------------------------------------------

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
