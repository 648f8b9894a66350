"""``wai-dispatch serve`` (the HTTP service on uvicorn) and ``wai-dispatch tokens
create|list|revoke`` (bearer tokens in the report store). FastAPI and uvicorn are imported only
when ``serve`` runs."""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from wai_dispatch.cli.errors import UsageError
from wai_dispatch.cli.flags import EXIT_NO, EXIT_OK
from wai_dispatch.cli.options import settings
from wai_dispatch.cli.serve_ray import run_ray
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.dispatch import strictjson
from wai_dispatch.service.settings import Settings, hand_over
from wai_dispatch.service.store import bearer, bearer_snapshot
from wai_dispatch.service.store.bearer import ADMIN_TOKEN_FILE, admin_note, ensure_admin
from wai_dispatch.service.store.report_store import ReportStore, StoreDown


def _store(args: argparse.Namespace) -> ReportStore:
    store = ReportStore(settings(args).url)
    store.migrate()
    return store


def _snapshot(args: argparse.Namespace, store: ReportStore) -> str | None:
    """Rewrite the token snapshot on the spool volume (docs/service.md, "The token
    snapshot"); why not, or ``None``."""
    chosen = settings(args)
    if chosen.token_snapshot_max_age_s <= 0:
        return None
    if chosen.spool_dir is None:  # this host's own data directory's spool: serve's
        chosen.spool_volume.mkdir(parents=True, exist_ok=True)
    return bearer.rewrite_snapshot(store, chosen.spool_volume / bearer_snapshot.FILE)


def run_create(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        secret = bearer.create(store, args.name, bearer.parse_role(args.role))
        _snapshot(args, store)  # else the first replica reading the store writes it
    finally:
        store.dispose()
    if args.json:
        print(json.dumps({"name": args.name, "role": args.role, "token": secret}))
    else:
        print(secret)
    return 0


def run_list(args: argparse.Namespace) -> int:
    rows = bearer.listing(_store(args))
    if args.json:
        print(json.dumps(rows, indent=2))
    for r in [] if args.json else rows:
        state = "revoked" if r["revoked"] else "live"
        print(f"{r['id']:4}  {r['name']:32} {r['role']:9} {state}")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    """Revoke in the store, then in the snapshot a replica started in a store outage reads:
    exit 1 when it was not reached (the revocation is made; the snapshot still lets the
    token in until a replica reading the store rewrites it)."""
    store = _store(args)
    try:
        n = bearer.revoke(store, args.name)
        why = _snapshot(args, store)
    finally:
        store.dispose()
    if args.json:
        print(json.dumps({"revoked": n, "snapshot_not_rewritten": why}))
    else:
        print(f"revoked {n} token(s)")
    if why is not None and not args.json:
        print(f"wai-dispatch: the token snapshot was not rewritten: {why}", file=sys.stderr)
    return EXIT_OK if why is None else EXIT_NO


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings ``serve`` runs on: the command's, where ``--workers N`` (N processes
    sharing the CPUs) gives each ONNX Runtime pool and each decode pool its part of the CPUs
    unless ``ort_threads`` / ``decode_threads`` were set (``--ray``: each replica takes its
    ``--replica-cpus``, service/rayserve/deployment.py)."""
    chosen = settings(args)
    if getattr(args, "ray", None):
        return chosen
    if chosen.workers <= 1:
        return chosen
    part = max(1, len(os.sched_getaffinity(0)) // chosen.workers)
    given = chosen.model_fields_set
    update = {name: part for name in ("ort_threads", "decode_threads") if name not in given}
    return chosen.model_copy(update=update)


def banner(chosen: Settings) -> list[str]:
    """What ``serve`` prints at start, the store migrated and the admin token ensured first.
    Its ``admin token:`` line is read from the token table (and ``WAI_ADMIN_TOKEN_FILE``), so
    every replica on one database prints the same; the replica whose first start wrote
    ``<data_dir>/admin-token`` says so on the next line (docs/service.md)."""
    store = ReportStore(chosen.url)
    written = None
    try:
        store.migrate()
        written = ensure_admin(store, chosen.data_dir, chosen.admin_token_file)
        note = admin_note(store, chosen.admin_token_file)
    except StoreDown as exc:  # start anyway: decodes spool until the store returns
        note = f"not read: the report store is down ({exc}); decodes spool until it returns"
    finally:
        store.dispose()
    url = f"http://{chosen.host}:{chosen.port}"
    local = chosen.data_dir / ADMIN_TOKEN_FILE
    sample = envelopes_dir() / "bmshj2018-demo-q3.json"
    docs = f"{url}/docs" if chosen.docs else f"{url}/openapi.json"
    lines = [f"wai-dispatch serving on {url}  (API docs: {docs})", f"admin token: {note}"]
    secret_file: Path | None = chosen.admin_token_file
    if written is not None:
        lines.append(f"admin token written to {local} (mode 0600; first start)")
        secret_file = local
    elif secret_file is None and local.is_file():
        lines.append(f"admin token in {local}")
        secret_file = local
    bearer = f"$(cat {shlex.quote(str(secret_file))})" if secret_file else "$TOKEN"
    lines.append("decode the sample envelope:" + ("" if secret_file else " (TOKEN: a token)"))
    lines.append(
        f'  curl -s -H "Authorization: Bearer {bearer}" '
        f"-H 'Content-Type: application/json' --data-binary @{shlex.quote(str(sample))} "
        f"{url}/v1/decode"
    )
    return lines


#: The protocol ``serve`` hands uvicorn for each HTTP/1.1 parser (the ``http`` setting): uvicorn's
#: own with the read deadlines (service/http/edge.py), as import strings (uvicorn imports them).
PROTOCOLS = {
    "h11": "wai_dispatch.service.http.edge:ReadTimeouts",
    "httptools": "wai_dispatch.service.http.edge:ReadTimeoutsHttptools",
}


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    chosen = serve_settings(args)
    ray_flags = [f for f in ("replicas", "autoscale", "replica_cpus") if getattr(args, f, None)]
    if getattr(args, "ray", None):  # Ray Serve's replicas, each its own (docs/ray.md)
        if chosen.workers > 1:
            raise UsageError("--workers is uvicorn's; on Ray, --replicas N or --autoscale MIN:MAX")
        return run_ray(args, chosen, banner)
    if ray_flags or getattr(args, "detach", False):
        named = ", ".join("--" + f.replace("_", "-") for f in ray_flags or ["detach"])
        raise UsageError(f"{named}: only with --ray ADDRESS")
    hand_over(chosen)  # uvicorn's workers (and this process's app) load exactly these
    values = chosen.data_dir / "metrics" / str(os.getpid())
    if chosen.workers > 1:  # one /metrics over every worker: prometheus-client's multiprocess mode
        shutil.rmtree(values, ignore_errors=True)
        values.mkdir(parents=True, mode=0o700)
        # the library's own variable, read when a worker imports it
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(values)
    # the banner once the socket listens and /readyz says ready: its curl then works at once
    announce_when_ready(chosen, banner(chosen))
    uvicorn.run(
        "wai_dispatch.service.http.app:create_app",
        factory=True,
        host=chosen.host,
        port=chosen.port,
        workers=chosen.workers,
        log_config=None,
        # behind a reverse proxy (docs/operations.md): the path prefix it serves us under, and
        # the proxies whose X-Forwarded-For/-Proto headers give the client and the scheme
        root_path=chosen.root_path,
        proxy_headers=True,
        forwarded_allow_ips=chosen.forwarded_allow_ips,
        access_log=False,
        # connection limits (docs/service.md): header and body read deadlines per request
        # (the protocol on the parser the settings chose, named as uvicorn names its own),
        # idle keep-alive, open connections, header bytes (h11's own bound; the httptools
        # protocol's is its own); the in-flight body budget is the app's (service/http/edge.py)
        http=PROTOCOLS[chosen.http_parser],
        loop=chosen.loop_impl,
        timeout_keep_alive=chosen.keep_alive_s,
        limit_concurrency=chosen.max_connections,
        h11_max_incomplete_event_size=chosen.max_header_bytes,
        # the supervisor pings each worker; one busy building programs (a cold decode, the
        # warming) answers late, and must not be killed for it: the deadline is a decode's
        timeout_worker_healthcheck=max(30, math.ceil(chosen.decode_timeout_s)),
    )
    shutil.rmtree(values, ignore_errors=True)
    return 0


#: How long ``serve`` waits for ``/readyz`` before it prints the banner all the same, saying why.
READY_WAIT_S = 300.0


def announce_when_ready(chosen: Settings, lines: list[str]) -> threading.Thread:
    """Print ``lines`` from a thread once ``/readyz`` on the address ``serve`` listens on
    answers 200 (or after :data:`READY_WAIT_S`, with a last line saying what it answered)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(chosen.host, chosen.host)
    where = f"[{host}]" if ":" in host else host
    url = f"http://{where}:{chosen.port}/readyz"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy

    def wait() -> None:
        deadline = time.monotonic() + READY_WAIT_S
        last = "not listening"
        while time.monotonic() < deadline:
            try:
                with opener.open(url, timeout=5) as answer:
                    if answer.status == 200:
                        break
            except urllib.error.HTTPError as exc:  # listening, not ready yet (503)
                last = _reasons(exc)
            except OSError:
                pass  # not listening yet
            time.sleep(0.1)
        else:
            lines.append(f"(not ready after {READY_WAIT_S:.0f} s: /readyz: {last})")
        print("\n".join(lines), flush=True)

    thread = threading.Thread(target=wait, name="banner", daemon=True)
    thread.start()
    return thread


def _reasons(exc: urllib.error.HTTPError) -> str:
    try:
        body = strictjson.loads(exc.read())
    except (OSError, ValueError):  # StrictJSONError is a ValueError
        return f"HTTP {exc.code}"
    reasons = body.get("reasons") if isinstance(body, dict) else None
    return "; ".join(map(str, reasons)) if isinstance(reasons, list) else f"HTTP {exc.code}"
