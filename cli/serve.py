"""``wai-dispatch serve`` (the HTTP service on uvicorn) and ``wai-dispatch tokens
create|list|revoke`` (bearer tokens in the report store). FastAPI and uvicorn are imported only
when ``serve`` runs."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path
from typing import Any

from wai_dispatch.cli.options import setting_flags, settings
from wai_dispatch.conformance import envelopes_dir
from wai_dispatch.service.decoding.settings import Settings, hand_over
from wai_dispatch.service.store import tokens
from wai_dispatch.service.store.db import ReportStore
from wai_dispatch.service.store.tokens import ADMIN_TOKEN_FILE, admin_note, ensure_admin


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the HTTP decoder service")
    p.add_argument("--host", help="address to listen on (WAI_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (WAI_PORT, default 8080)")
    p.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    p.add_argument("--data-dir", type=Path, help="sets, report store, spool (WAI_DATA_DIR)")
    setting_flags(p, "host", "port", "data_dir")
    p.set_defaults(func=run_serve)

    t = sub.add_parser("tokens", help="bearer tokens of the service (sink, operator, admin)")
    verbs = t.add_subparsers(dest="verb", metavar="VERB", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", type=Path, help="the data directory (WAI_DATA_DIR)")
    setting_flags(common, "data_dir")
    common.add_argument("--json", action="store_true", help="print JSON")
    v = verbs.add_parser("create", parents=[common], help="create a token; prints it once")
    v.add_argument("name", help="who holds it (a sink's name files its reports)")
    v.add_argument("--role", default="sink", choices=("sink", "operator", "admin"))
    v.set_defaults(func=run_create)
    v = verbs.add_parser("list", parents=[common], help="tokens (never their secrets)")
    v.set_defaults(func=run_list)
    v = verbs.add_parser("revoke", parents=[common], help="revoke a name's tokens (or an id)")
    v.add_argument("name")
    v.set_defaults(func=run_revoke)


def _store(args: argparse.Namespace) -> Any:
    store = ReportStore(settings(args).url)
    store.migrate()
    return store


def run_create(args: argparse.Namespace) -> int:
    secret = tokens.create(_store(args), args.name, tokens.parse_role(args.role))
    if args.json:
        print(json.dumps({"name": args.name, "role": args.role, "token": secret}))
    else:
        print(secret)
    return 0


def run_list(args: argparse.Namespace) -> int:
    rows = tokens.listing(_store(args))
    if args.json:
        print(json.dumps(rows, indent=2))
    for r in [] if args.json else rows:
        state = "revoked" if r["revoked"] else "live"
        print(f"{r['id']:4}  {r['name']:32} {r['role']:9} {state}")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    n = tokens.revoke(_store(args), args.name)
    print(json.dumps({"revoked": n}) if args.json else f"revoked {n} token(s)")
    return 0


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings ``serve`` runs on: the command's, where ``--workers N`` (N processes
    sharing the CPUs) gives each ONNX Runtime pool and each decode pool its part of the CPUs
    unless ``ort_threads`` / ``decode_threads`` were set."""
    chosen = settings(args)
    if args.workers <= 1:
        return chosen
    part = max(1, len(os.sched_getaffinity(0)) // args.workers)
    given = chosen.model_fields_set
    update = {name: part for name in ("ort_threads", "decode_threads") if name not in given}
    return chosen.model_copy(update=update)


def banner(chosen: Settings) -> list[str]:
    """What ``serve`` prints at start, the store migrated and the admin token ensured first.
    Its ``admin token:`` line is read from the token table (and ``WAI_ADMIN_TOKEN_FILE``), so
    every replica on one database prints the same; the replica whose first start wrote
    ``<data_dir>/admin-token`` says so on the next line (docs/service.md)."""
    store = ReportStore(chosen.url)
    try:
        store.migrate()
        written = ensure_admin(store, chosen.data_dir, chosen.admin_token_file)
        note = admin_note(store, chosen.admin_token_file)
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


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    chosen = serve_settings(args)
    hand_over(chosen)  # uvicorn's workers (and this process's app) load exactly these
    print("\n".join(banner(chosen)), flush=True)
    uvicorn.run(
        "wai_dispatch.service.http.app:create_app",
        factory=True,
        host=chosen.host,
        port=chosen.port,
        workers=args.workers,
        log_config=None,
        access_log=False,
        # connection limits (docs/service.md): header and body read deadlines per request
        # (the protocol, named as uvicorn names its own), idle keep-alive, open connections,
        # header bytes; the in-flight body budget is the app's (service/http/limits.py)
        http="wai_dispatch.service.http.limits:ReadTimeouts",
        timeout_keep_alive=chosen.keep_alive_s,
        limit_concurrency=chosen.max_connections,
        h11_max_incomplete_event_size=chosen.max_header_bytes,
    )
    return 0
