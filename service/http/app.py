"""The FastAPI application: its state (the :class:`~service.http.deps.Service`: decoder, store,
spool, tokens, admission, metrics, reached by routes through :mod:`service.http.deps`), the
error answers and the per-request id and log line. ``create_app()`` is uvicorn's factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from wai_dispatch.codec.sets import install_bundled
from wai_dispatch.conformance import sets_dir
from wai_dispatch.dispatch.errors import WaiError
from wai_dispatch.paths.onnx import configure_thread_pool
from wai_dispatch.service import settings as settings_mod
from wai_dispatch.service.decoding.decoder import Decoder
from wai_dispatch.service.decoding.setcache import removed
from wai_dispatch.service.decoding.warm import Warmup
from wai_dispatch.service.http import logs as jsonlog
from wai_dispatch.service.http import openapi
from wai_dispatch.service.http.admission import Admission
from wai_dispatch.service.http.deps import Service
from wai_dispatch.service.http.edge import BodyBudget, RequestId, checked_text
from wai_dispatch.service.http.errors import (
    STATUSES,
    ClientDisconnected,
    HttpError,
    InternalError,
    MethodNotAllowed,
    RequestInvalid,
    RouteNotFound,
    error_body,
    headers_of,
    request_id,
    status_of,
)
from wai_dispatch.service.http.metrics import Metrics
from wai_dispatch.service.http.routes import decode as api_decode
from wai_dispatch.service.http.routes import fleet as api_fleet
from wai_dispatch.service.http.routes import governance as api_governance
from wai_dispatch.service.http.routes import ops as api_ops
from wai_dispatch.service.http.routes import reports as api_reports
from wai_dispatch.service.http.routes import sets as api_sets
from wai_dispatch.service.settings import Settings
from wai_dispatch.service.store import bearer_snapshot
from wai_dispatch.service.store.aggregator import Aggregator
from wai_dispatch.service.store.bearer import (
    TokenCache,
    admin_note,
    ensure_admin,
)
from wai_dispatch.service.store.policies import PolicyStore
from wai_dispatch.service.store.recorder import Recorder
from wai_dispatch.service.store.report_store import ReportStore, StoreDown
from wai_dispatch.service.store.request_errors import ErrorLog
from wai_dispatch.service.store.retention import Pruner
from wai_dispatch.service.store.setregistry import SetRegistry
from wai_dispatch.service.store.setsync import SetSync
from wai_dispatch.service.store.spool_volume import SpoolVolume, default_replica_id
from wai_dispatch.service.web import dashboard as dashboard_app
from wai_dispatch.service.web import page as api_page

log = logging.getLogger("wai_dispatch.service")


def start(settings: Settings) -> Service:
    """Open everything ``serve`` needs, migrating the store; the admin token of
    ``WAI_ADMIN_TOKEN_FILE`` is ensured in the token table, else the first start on a store with
    no admin token writes one to ``<data_dir>/admin-token`` and logs where; the set cache is
    synced with the set registry, and kept so by a thread. A store that is down does not stop
    the start: decodes spool, and the store is migrated when it returns."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # ONNX Runtime's one process-wide thread pool is created before any session.
    configure_thread_pool(settings.ort_threads)
    # The set store is this replica's cache of the set registry (docs/sets.md): the bundled
    # sets go through the registry (service/store/setsync.py), not straight into the cache.
    decoder = Decoder.assemble(
        **settings.decoder_args(bundled=False), program_cache_bytes=settings.program_cache_bytes
    )
    store = ReportStore(settings.url)
    tokens = TokenCache(
        store,
        settings.token_refresh_s,
        snapshot=settings.spool_volume / bearer_snapshot.FILE,
        snapshot_max_age_s=settings.token_snapshot_max_age_s,
    )
    recorder = _open_recorder(store, settings)
    aggregator = Aggregator(store)  # the inbox into the roll-ups, off the decodes' commits
    sets = _sync_sets(store, decoder, settings)
    log.info("admin token: %s", admin_note(store, settings.admin_token_file))
    tokens.reload()
    admission = Admission(
        workers=settings.decode_workers,
        queue=settings.queue,
        memory_budget=settings.memory_budget_bytes,
        timeout_s=settings.decode_timeout_s,
        max_latent_elements=settings.max_latent_elements,
    )
    warmup = Warmup(decoder)
    if settings.warm:  # in a thread: /healthz answers meanwhile, /readyz says "warming"
        warmup.start()
    else:
        warmup.skip()
    return Service(
        settings=settings,
        decoder=decoder,
        report_store=store,
        recorder=recorder,
        tokens=tokens,
        admission=admission,
        metrics=_metrics(admission, recorder, decoder, aggregator),
        policies=PolicyStore(store),
        warmup=warmup,
        sets=sets,
        pruner=_pruner(store, settings),
        errors=ErrorLog(store, rows_per_hour=settings.request_error_rows),
        aggregator=aggregator,
    )


def _open_recorder(store: ReportStore, settings: Settings) -> Recorder:
    """The recorder over this replica's spool, the store migrated first; a store that is down
    at start is migrated by the recorder's thread when it returns."""
    volume = SpoolVolume(
        settings.spool_volume,
        settings.replica_id or default_replica_id(),
        settings.spool_max_bytes,
    )
    # group commit (service/store/recorder.py), or one transaction per decode
    window_s = settings.report_commit_window_ms / 1000 if settings.report_group_commit else None
    try:
        store.migrate()
        _ensure_admin(store, settings)
    except StoreDown as exc:
        # Start anyway: decodes spool, and the recorder's thread migrates when it returns.
        log.warning("report store down at start, spooling until it returns: %s", exc)
        return Recorder(
            store,
            volume.own,
            migrate=lambda: _migrate(store, settings),
            adopt=volume.adopt,
            commit_window_s=window_s,
            commit_max=settings.report_commit_max,
        )
    return Recorder(
        store,
        volume.own,
        adopt=volume.adopt,
        commit_window_s=window_s,
        commit_max=settings.report_commit_max,
    )


def _sync_sets(store: ReportStore, decoder: Decoder, settings: Settings) -> SetSync:
    """The set registry's sync, bootstrapped and started: the bundled sets installed through
    the registry, or straight into the cache while the registry is down."""
    sets = SetSync(
        SetRegistry(store),
        decoder,
        settings.sets_refresh_s,
        bundled=sets_dir() if settings.bundled_sets else None,
    )
    try:
        for folder, problem in sets.bootstrap().items():
            log.warning(
                "bundled set %s not installed: %s: %s", folder, problem.code, problem.message
            )
    except StoreDown as exc:
        # The sets are the cache's as last synced (the bundled ones, unless removed, on a
        # first start) until the sync's thread reaches the registry and bootstraps.
        log.warning("set registry not read at start, serving the set cache: %s", exc)
        if settings.bundled_sets:
            install_bundled(decoder.set_store, sets_dir(), skip=removed(decoder.set_store.root))
    sets.start()
    return sets


def _metrics(
    admission: Admission, recorder: Recorder, decoder: Decoder, aggregator: Aggregator
) -> Metrics:
    metrics = Metrics()
    metrics.bind("queue_depth", lambda: admission.waiting)
    metrics.bind("running", lambda: admission.running)
    metrics.bind("spool_bytes", recorder.pending_bytes)
    metrics.bind("seconds_per_pixel", lambda: admission.seconds_per_pixel)
    metrics.bind("memory_held", lambda: float(admission.held()))
    metrics.bind("store_up", lambda: 1.0 if recorder.store_up else 0.0)
    metrics.bind("inbox_reports", lambda: float(aggregator.lag()[0]))
    metrics.bind("inbox_oldest_seconds", lambda: aggregator.lag()[1])
    cache = decoder.programs
    metrics.bind_counter("cache_hits", lambda: cache.hits)
    metrics.bind_counter("cache_misses", lambda: cache.misses)
    metrics.bind_counter("cache_evictions", lambda: cache.evictions)
    metrics.bind("cache_bytes", lambda: cache.bytes)
    return metrics


def _pruner(store: ReportStore, settings: Settings) -> Pruner | None:
    """The retention thread, when a retention is set; ``None``: every report is kept."""
    if not (settings.report_retention_days or settings.rollup_retention_days):
        return None
    return Pruner(
        store,
        report_days=settings.report_retention_days,
        rollup_days=settings.rollup_retention_days,
        interval_s=settings.prune_interval_s,
    )


def _migrate(store: ReportStore, settings: Settings) -> None:
    store.migrate()
    _ensure_admin(store, settings)


def _ensure_admin(store: ReportStore, settings: Settings) -> None:
    try:
        written = ensure_admin(store, settings.data_dir, settings.admin_token_file)
    except SQLAlchemyError as exc:
        raise StoreDown(str(exc).splitlines()[0]) from exc
    if written is not None:
        log.warning(
            "first start: an admin token was written to %s",
            written,
            extra={"admin_token_file": str(written)},
        )


def create_app(settings: Settings | None = None) -> FastAPI:
    """The application; settings from the environment when not given (uvicorn's factory)."""

    chosen = settings or settings_mod.load()
    jsonlog.configure(chosen.log_level)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = start(chosen)
        app.state.service = service
        where = {"data_dir": str(chosen.data_dir), "store": service.report_store.dialect}
        log.info("serving", extra=where)
        try:
            yield
        finally:
            service.close()

    app = FastAPI(
        title="wai-dispatch",
        version="0.1.0",
        description="Decodes wai-envelope/1 envelopes and keeps every wai-neural-dispatch/1 "
        "report (WAI Neural Dispatch).",
        lifespan=lifespan,
        docs_url="/docs" if chosen.docs else None,
        redoc_url=None,  # ReDoc, like Swagger UI, loads its scripts from a CDN
        # every route's query and path parameters checked first (service/http/edge.py)
        dependencies=[Depends(checked_text)],
    )
    app.add_middleware(BodyBudget, limit=chosen.max_inflight_body_bytes)
    app.add_middleware(RequestId, on_error=_internal_error)
    for module in (api_decode, api_reports, api_sets, api_ops, api_governance, api_fleet):
        app.include_router(module.router)
    dashboard_app.install(app)
    if chosen.page:
        api_page.install(app)
    for error, status in STATUSES:  # Starlette picks the handler by the error's class
        app.add_exception_handler(error, _answer(status))
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_disconnected)
    openapi.install(app)
    return app


def _count(request: Request, code: str) -> None:
    """Count an error answer in ``/metrics`` (every 4xx answered, whoever answered it, is noted
    for the dashboard by the request-id middleware: service/http/edge.py)."""
    service = getattr(request.app.state, "service", None)
    if service is None:
        return
    service.metrics.errors.labels(code).inc()


def _answer(status: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    """The handler of the errors answered with ``status``."""

    async def answer(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, WaiError)
        return _respond(request, exc, status)

    return answer


def _respond(request: Request, error: WaiError, status: int | None = None) -> JSONResponse:
    """The answer to ``error``: its status (its class's unless given), its code and message,
    its headers (``Retry-After`` included), counted in ``/metrics``."""
    status = status_of(type(error)) if status is None else status
    _count(request, error.code)
    body = error_body(request, error.code, error.message)
    return JSONResponse(body, status, headers=headers_of(error) or None)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return _respond(request, RequestInvalid(f"{where}: {first.get('msg', 'invalid')}"))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    known = (c for c in (RouteNotFound, MethodNotAllowed) if status_of(c) == exc.status_code)
    error = next(known, HttpError)(str(exc.detail), headers=exc.headers)
    # not_found and method_not_allowed answer their own status (the same 404 and 405);
    # http_error, the rest of the HTTP layer's refusals, keeps the status that layer chose
    return _respond(request, error, exc.status_code)


async def _client_disconnected(request: Request, exc: Exception) -> JSONResponse:
    """The client went away mid-request: its event, logged and counted, not a fault of ours
    (the answer goes nowhere)."""
    log.info("client disconnected", extra={"request_id": request_id(request)})
    return _respond(request, ClientDisconnected("the client closed the connection"))


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("internal error", extra={"request_id": request_id(request)})
    return _respond(request, InternalError("an internal error"))
